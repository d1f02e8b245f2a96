"""``specpolicy bench ...``: benchmarks that print numbers (never used as test assertions)."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.cli.common import (
    BenchPromptsOption,
    DatasetOption,
    DeviceOption,
    DrafterOption,
    DraftSamplingOption,
    DtypeOption,
    FormatOption,
    MaxNewTokensOption,
    OutputFormat,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    check_draft_sampling,
    emit,
    fail,
    stderr,
)
from specpolicy.defaults import (
    BENCH_ENV_LIVE_EPISODES,
    BENCH_ENV_NUM_ENVS,
    BENCH_ENV_STEPS,
    LATENCY_CHECK_PROMPTS,
    LATENCY_CONTEXT,
    LATENCY_REPEATS,
    MAX_BLOCK_SIZE,
    MAX_PROMPT_TOKENS,
    SHIPPED_SWEEP_CANDIDATES,
    TRAINING_BLOCK_SIZE,
)

app = typer.Typer(help="Benchmarks on this machine.", no_args_is_help=True)


@app.command("decode")
def decode(
    target: str = typer.Option(
        "tiny", "--target", help="target: tiny, random (random weights, built in memory), a local folder or a hub id"
    ),
    drafter: str = DrafterOption,
    prompts: int = BenchPromptsOption,
    dataset: str = DatasetOption,
    max_new_tokens: int = MaxNewTokensOption,
    block_size: int = typer.Option(TRAINING_BLOCK_SIZE, min=1, max=MAX_BLOCK_SIZE, help="speculative block size B"),
    temperature: float = TemperatureOption,
    draft_sampling: bool = DraftSamplingOption,
    threads: int = ThreadsOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Loop overhead, plain AR vs speculative tokens/s, and transformers' generate, at pinned threads."""
    from specpolicy.bench.decode import bench_decode
    from specpolicy.sweep.latency import pin_threads

    check_draft_sampling(draft_sampling, temperature)
    pin_threads(threads)
    if target == "random":
        import torch

        from specpolicy.models.testing import make_pair

        model, draft = make_pair(vocab=4096, hidden=256, layers=6)
        ids = [torch.randint(5, 4000, (64,)).tolist() for _ in range(prompts)]
    else:
        from specpolicy.data.prompts import encode_prompts
        from specpolicy.data.registry import load_prompts
        from specpolicy.models import load_pair

        chosen = load_prompts(dataset, prompts, 0)
        pair = load_pair(target, drafter, dtype, device)
        model, draft = pair.target, pair.drafter
        ids = encode_prompts(pair.tokenizer, chosen, max_tokens=MAX_PROMPT_TOKENS)
    stderr.print(f"decoding {prompts} prompts x {max_new_tokens} tokens at B=1 and B={block_size} ...")
    result = bench_decode(model, draft, ids, block_size=block_size, max_new_tokens=max_new_tokens,
                          temperature=temperature, draft_sampling=draft_sampling)
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="specpolicy bench decode")


@app.command("latency")
def latency(
    candidates: str = typer.Option(",".join(map(str, SHIPPED_SWEEP_CANDIDATES)), help="block sizes to price"),
    threads: int = ThreadsOption,
    repeats: int = typer.Option(LATENCY_REPEATS, min=4, help="interleaved repeats per block size"),
    context: int = typer.Option(LATENCY_CONTEXT, min=8, help="tokens already in the cache"),
    check_prompts: int = typer.Option(LATENCY_CHECK_PROMPTS, min=0,
                                      help="decode this many prompts to check modelled vs measured time"),
    strict: bool = typer.Option(False, help="exit with an error (and write nothing) when the table is flagged"),
    out: Path = typer.Option(None, help="save the table as JSON (e.g. for `compare --costs`)"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Measure this machine's cost table (draft, verify, AR step) robustly, flag noise, check it on decodes."""
    from specpolicy.bench.latency import check_against_decodes, table_rows
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair
    from specpolicy.sweep.latency import measure_costs, pin_threads

    sizes = parse_candidates(candidates)
    if out is not None and out.exists() and out.is_dir():
        raise fail(f"--out {out} is a folder; pass a file path such as {out / 'costs.json'}")
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    decoder = SpeculativeDecoder(pair.target, pair.drafter)
    stderr.print(f"measuring {len(sizes)} block sizes x {repeats} interleaved repeats at {threads} thread(s) ...")
    costs = measure_costs(decoder, sizes, context_length=context, repeats=repeats)
    emit(table_rows(costs), fmt, title=f"cost table: {costs.machine}, {costs.threads} thread(s), {costs.dtype}")
    for problem in costs.warnings:
        stderr.print(f"[yellow]warning:[/] {problem}")
    if check_prompts:
        ids = encode_prompts(pair.tokenizer, load_prompts("sharegpt", check_prompts, 0), max_tokens=MAX_PROMPT_TOKENS)
        for check in check_against_decodes(decoder, costs, ids, TRAINING_BLOCK_SIZE):
            stderr.print(f"{check.label}: measured {check.measured:.3f} s, modelled {check.modelled:.3f} s "
                         f"({check.error:+.1%})")
    if strict and costs.warnings:
        raise fail("the cost table is flagged (see the warnings); rerun on a quiet machine")
    if out is not None:
        costs.save(out)
        stderr.print(f"cost table saved to {out}")


@app.command("gpu-check")
def gpu_check(
    device: str = typer.Option("cuda", help="the accelerator to check (cpu runs the same comparisons)"),
    prompts: int = BenchPromptsOption,
    max_new_tokens: int = MaxNewTokensOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """The shipped pair on a GPU vs CPU float32: outputs, cycles, replay = live, bf16 drift, speed (no downloads)."""
    from specpolicy.bench.gpu_check import gpu_check as run_checks
    from specpolicy.models.loading import resolve_device

    resolve_device(device)  # an unknown or unavailable device fails here, before anything loads
    checks = run_checks(device, prompts, max_new_tokens)
    emit([c.row() for c in checks], fmt, title=f"specpolicy bench gpu-check ({device})")
    if any(c.passed is False for c in checks):
        raise typer.Exit(code=1)


@app.command("sweep")
def sweep(
    prompts: int = BenchPromptsOption,
    candidates: str = typer.Option(",".join(map(str, SHIPPED_SWEEP_CANDIDATES)), help="block sizes"),
    max_new_tokens: int = MaxNewTokensOption,
    target: str = typer.Option("tiny", "--target"),
    drafter: str = DrafterOption,
    dataset: str = DatasetOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Replay sweep cost vs one live decode and vs the naive live sweep; replay/live cycle agreement."""
    from specpolicy.bench.sweep import bench_sweep
    from specpolicy.cli.progress import progress_bar
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    sizes = parse_candidates(candidates)
    chosen = load_prompts(dataset, prompts, 0)  # a bad --dataset is named before any model loads
    pair = load_pair(target, drafter, dtype, device)
    ids = encode_prompts(pair.tokenizer, chosen, max_tokens=MAX_PROMPT_TOKENS)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=max_new_tokens)
    with progress_bar("bench sweep", len(ids)) as update:
        result = bench_sweep(decoder, ids, sizes, max_new_tokens, on_progress=update)
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="specpolicy bench sweep")
    for note in result.disagreements:
        stderr.print(f"disagreement: {note}")


@app.command("env")
def env(
    sweep: str = typer.Option(None, help="sweep store (default: the zoo's shipped sweep)"),
    num_envs: int = typer.Option(BENCH_ENV_NUM_ENVS, min=1),
    steps: int = typer.Option(BENCH_ENV_STEPS, min=1),
    live_episodes: int = typer.Option(BENCH_ENV_LIVE_EPISODES, min=0,
                                      help="episodes for the live-env overhead (0 skips it)"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Steps/s of the vectorised replay BlockSize-v0, and the live env's overhead over a bare decode."""
    from specpolicy.bench.env import live_env_overhead, vector_steps_per_second

    rows = [{"metric": f"vector replay BlockSize-v0 steps/s ({num_envs} envs)",
             "value": f"{vector_steps_per_second(sweep, num_envs, steps):,.0f}"}]
    if live_episodes:
        from specpolicy.models import load_pair

        env_s, bare_s = live_env_overhead(load_pair(), "sharegpt", live_episodes)
        rows += [{"metric": "live env episode (s)", "value": f"{env_s:.3f}"},
                 {"metric": "bare decode of the same prompt (s)", "value": f"{bare_s:.3f}"},
                 {"metric": "live env overhead", "value": f"{100 * (env_s / bare_s - 1):.1f}%"}]
    emit(rows, fmt, title="specpolicy bench env")
