"""``python -m benchmarks decode|hf|verify|sweep|env|twin|...``: the maintainers' benchmarks (run from a
checkout)."""

from __future__ import annotations

from pathlib import Path

import typer

from benchmarks import ENV_LIVE_EPISODES, ENV_NUM_ENVS, ENV_STEPS
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
    ServerOption,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    check_draft_sampling,
    emit,
    fail,
    policy_names,
    stderr,
)
from specpolicy.cli.errors import guard_all
from specpolicy.defaults import (
    DEFAULT_POLICY,
    MAX_BLOCK_SIZE,
    MAX_PROMPT_TOKENS,
    SHIPPED_SWEEP_CANDIDATES,
    TRAINING_BLOCK_SIZE,
)

app = typer.Typer(help="The benchmarks behind docs/benchmarks.md (numbers, never test assertions).",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode="markdown")


@app.command("decode")
def decode(
    target: str = typer.Option(
        "tiny", "--target", help="target: tiny, random (random weights, built in memory), a local folder or "
                               "a hub id"
    ),
    drafter: str = DrafterOption,
    prompts: int = BenchPromptsOption,
    dataset: str = DatasetOption,
    max_new_tokens: int = MaxNewTokensOption,
    block_size: int = typer.Option(TRAINING_BLOCK_SIZE, min=1, max=MAX_BLOCK_SIZE,
                                   help="speculative block size B"),
    temperature: float = TemperatureOption,
    draft_sampling: bool = DraftSamplingOption,
    threads: int = ThreadsOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Loop overhead, plain AR vs speculative tokens/s, and transformers' generate, at pinned threads."""
    from benchmarks.decode import bench_decode
    from specpolicy.sweep.latency import pin_threads

    check_draft_sampling(draft_sampling, temperature)
    pin_threads(threads)
    if target == "random":
        import torch

        from zoo_build.random_models import make_pair

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
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="python -m benchmarks decode")


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
    from benchmarks.sweep import bench_sweep
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
    with progress_bar("benchmarks sweep", len(ids)) as update:
        result = bench_sweep(decoder, ids, sizes, max_new_tokens, on_progress=update)
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="python -m benchmarks sweep")
    for note in result.disagreements:
        stderr.print(f"disagreement: {note}")


@app.command("engine")
def engine(
    prompts: int = typer.Option(48, min=1, help="held-out prompts of the shipped sweep"),
    sweep: Path = typer.Option(None,
                               help="a replay sweep of the tiny pair (default: the zoo's held-out one)"),
    threads: int = ThreadsOption,
    server: str = ServerOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """llama.cpp against specpolicy on the same prompts: losslessness, outputs, accepted drafts per cycle."""
    from benchmarks.engine import bench_fidelity
    from specpolicy.cli.progress import progress_bar
    from specpolicy.engines.build import find_server, gguf_pair
    from specpolicy.sweep.store import SweepStore
    from specpolicy.zoo import ZOO_DIR

    store = SweepStore.load(sweep or ZOO_DIR / "sweeps" / "sharegpt")  # the input first, then the engine
    binary = find_server(server)
    with progress_bar("benchmarks engine", prompts) as update:
        result = bench_fidelity(binary, gguf_pair("tiny", "tiny"), store, prompts, threads,
                                on_progress=update)
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="python -m benchmarks engine")
    for prompt_id, engine_mean, replay_mean in result.worst:
        stderr.print(f"outside {prompt_id}: llama.cpp {engine_mean:.3f} accepted per cycle, replay "
                     f"{replay_mean:.3f}")


@app.command("env")
def env(
    sweep: str = typer.Option(None, help="sweep store (default: the zoo's shipped sweep)"),
    num_envs: int = typer.Option(ENV_NUM_ENVS, min=1),
    steps: int = typer.Option(ENV_STEPS, min=1),
    live_episodes: int = typer.Option(ENV_LIVE_EPISODES, min=0,
                                      help="episodes for the live-env overhead (0 skips it)"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Steps/s of the vectorised replay BlockSize-v0, and the live env's overhead over a bare decode."""
    from benchmarks.env import live_env_overhead, vector_steps_per_second

    rows = [{"metric": f"vector replay BlockSize-v0 steps/s ({num_envs} envs)",
             "value": f"{vector_steps_per_second(sweep, num_envs, steps):,.0f}"}]
    if live_episodes:
        from specpolicy.models import load_pair

        env_s, bare_s = live_env_overhead(load_pair(), "sharegpt", live_episodes)
        rows += [{"metric": "live env episode (s)", "value": f"{env_s:.3f}"},
                 {"metric": "bare decode of the same prompt (s)", "value": f"{bare_s:.3f}"},
                 {"metric": "live env overhead", "value": f"{100 * (env_s / bare_s - 1):.1f}%"}]
    emit(rows, fmt, title="python -m benchmarks env")


@app.command("verify")
def verify(
    policies: str = typer.Option("threshold,marginal16,adaptive-verify", help="policies with verify rules"),
    prompts: int = BenchPromptsOption,
    candidates: str = typer.Option("1,2,4,8,16,32", help="block sizes the replay records"),
    max_new_tokens: int = MaxNewTokensOption,
    threads: int = ThreadsOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """(B, L) replay against live decoding, cycle for cycle, for policies that choose verify lengths."""
    from benchmarks.verify import bench_verify
    from specpolicy.cli.progress import progress_bar
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair
    from specpolicy.registry import get_registry
    from specpolicy.sweep.latency import cached_costs, pin_threads

    sizes = parse_candidates(candidates)
    built = [get_registry().create(name, sizes) for name in policy_names(policies)]
    pin_threads(threads)
    pair = load_pair("tiny", "tiny", "float32", "cpu")
    ids = encode_prompts(pair.tokenizer, load_prompts("sharegpt", prompts, 0), max_tokens=MAX_PROMPT_TOKENS)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=max_new_tokens)
    costs = cached_costs(decoder, sizes, pair.metadata(), stderr.print)
    with progress_bar("benchmarks verify", len(ids)) as update:
        results = bench_verify(decoder, ids, sizes, built, costs, max_new_tokens, on_progress=update)
    emit([r.row() for r in results], fmt, title=f"(B, L) replay vs live: {len(ids)} held-out prompts, T = 0")
    for result in results:
        for note in result.notes:
            stderr.print(f"{result.policy}: {note}")


@app.command("hf")
def hf_loop(
    policies: str = typer.Option("fixed16,blockpilot-guard", help="comma-separated policy names"),
    prompts: int = BenchPromptsOption,
    dataset: str = DatasetOption,
    max_new_tokens: int = MaxNewTokensOption,
    threads: int = ThreadsOption,
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = typer.Option("float32", help="float32 is where the two loops must agree exactly"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """One policy in specpolicy's decoder and in transformers' generate(): outputs, cycles, tokens/s."""
    from benchmarks.hf_loop import bench_hf
    from specpolicy.checks import check_vocabulary
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.hf import require_dflash_support, resolve_policy
    from specpolicy.models import load_pair
    from specpolicy.models.sources import target_vocab_size
    from specpolicy.sweep.latency import cached_costs, pin_threads

    require_dflash_support()
    names = policy_names(policies)
    if not names:
        raise fail("no policies given; e.g. --policies fixed16,blockpilot-guard")
    built = [resolve_policy(name) for name in names]
    check_vocabulary([p for p in built if not isinstance(p, int)], target_vocab_size(target),
                     f"target {target!r}")
    chosen = load_prompts(dataset, prompts, 0)  # a bad --dataset is named before any model loads
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    ids = encode_prompts(pair.tokenizer, chosen, max_tokens=MAX_PROMPT_TOKENS)
    sizes = {b for p in built for b in ([p] if isinstance(p, int) else p.choices())}
    costs = cached_costs(SpeculativeDecoder(pair.target, pair.drafter), sizes, pair.metadata(), stderr.print)
    with progress_bar("benchmarks hf", len(ids)) as update:
        rows = bench_hf(pair, ids, built, names, max_new_tokens, costs, on_progress=update)
    emit([r.row() for r in rows], fmt,
         title=f"decoder vs generate(): {len(ids)} prompts x {max_new_tokens} tokens, "
         f"{threads} thread(s), {dtype}")


@app.command("traces")
def traces(
    folder: Path = typer.Argument(
        ..., help="SpecDecode-Bench's data/llama3.1-8B folder (combined_{dataset}.jsonl)"),
    work: Path = typer.Option(Path("runs/traces"),
                              help="imported stores and trained policies (reused on rerun)"),
    drafter: str = typer.Option("eagle", help="eagle or ngram (n-gram drafting priced at 0)"),
    costs: str = typer.Option("aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024",
                              help="serving cost table (a file, or a table shipped in "
                              "specpolicy/zoo/measured)"),
    concurrency: str = typer.Option("1,16,64", help="requests served at once"),
) -> None:
    """Real traces served with a measured serving table of Llama-3.1-8B, its EAGLE-3 drafter priced per
    drafted position: fixed K, oracles, rules, a learned per-cycle policy, on held-out requests."""
    from benchmarks.traces import DATASETS, bench_traces, verdict_lines
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.files import check_folder_path
    from specpolicy.replay.batch_costs import BatchCostTable
    from specpolicy.sweep.traces.specdecode import SPECDECODE_DRAFTERS

    if drafter not in SPECDECODE_DRAFTERS:
        raise fail(f"--drafter {drafter} is not a drafter the traces record; use "
                   f"{' or '.join(SPECDECODE_DRAFTERS)}")
    missing = [f"combined_{name}.jsonl" for name in DATASETS
               if not (folder / f"combined_{name}.jsonl").is_file()]
    if missing:
        raise fail(f"{folder} lacks {', '.join(missing)}; pass SpecDecode-Bench's data/llama3.1-8B folder")
    concurrencies = tuple(parse_candidates(concurrency, "--concurrency", block_sizes=False))
    check_folder_path(work, f"--work {work}", "pass a folder for the imported stores")
    table = BatchCostTable.load(costs)  # every input checked before the imports and the training
    table.check_batches(concurrencies)
    verdicts = bench_traces(folder, work, table, drafter, concurrencies,
                            on_dataset=lambda name: stderr.print(f"traces: {name}"))
    typer.echo("\n".join(verdict_lines(verdicts)))
    for v in verdicts:
        speeds = ", ".join(f"{name} {row.speedup:.3f}x" for name, row in v.rows.items())
        stderr.print(f"{v.dataset} at {v.concurrency}: {speeds}", soft_wrap=True)


@app.command("signals")
def signals(
    sweep: Path = typer.Option(Path("specpolicy/zoo/tiny/sweeps/sharegpt"), help="a replay sweep store"),
    costs: Path = typer.Option(Path("tests/fixtures/costs-llamacpp-engine-cpu.json"),
                               help="the table pricing it"),
    blocks: str = typer.Option("8,12,16", help="blocks a gate may speculate with (each in the table)"),
) -> None:
    """What a signal read before drafting is worth: suffix-match gates, fitted on the training side, on
    held-out prompts beside plain steps and the per-step oracle (modelled)."""
    from benchmarks.signals import bench_signals
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.costs import CostTable

    sizes = parse_candidates(blocks, "--blocks")
    table = CostTable.load(costs)
    missing = [b for b in sizes if b not in table.verify_seconds]
    if missing:
        raise fail(f"--blocks {missing} are not in {costs} (it prices {list(table.block_sizes)})")
    for name, value in bench_signals(str(sweep), table, sizes).items():
        typer.echo(f"{name:64} {value:.3f}")


@app.command("twin")
def twin(sweep: Path = typer.Option(..., help="a replay sweep of the tiny pair (the main job's: "
                                           "~/.cache/specpolicy/sweeps/sharegpt-...)"),
         target: str = typer.Option("twin", help="the twin's target"),
         drafter: str = typer.Option("twin", help="the twin's drafter"),
         block_sizes: str = typer.Option("16", help="block sizes to decode at"),
         threads: int = ThreadsOption, fmt: OutputFormat = FormatOption) -> None:
    """The cost twin decodes what the tiny pair decodes: outputs and every cycle's accepted drafts against the
    sweep's record and replay."""
    from benchmarks.twin import bench_twin
    from specpolicy.cli.progress import progress_bar
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.sweep.latency import pin_threads
    from specpolicy.sweep.store import SweepStore

    pin_threads(threads)
    records = list(SweepStore.load(sweep).records())
    with progress_bar("twin", len(records)) as update:
        result = bench_twin(records, target, drafter, parse_candidates(block_sizes), on_progress=update)
    emit(result.rows(), fmt, title=f"the cost twin against the tiny pair: {sweep}, {threads} thread(s)")


@app.command("field")
def field(sweep: Path = typer.Option(..., help="a replay sweep recording every block size the controllers "
                                           "pick (specpolicy sweep --candidates 1-16)"),
          costs: list[str] = typer.Option([], help="cost tables beside the sweep's own (names or files)"),
          served: str = typer.Option("", help="a batch cost table to serve with at --concurrency"),
          concurrency: str = typer.Option(None, help="concurrencies served with --served (default 1,8,64)"),
          fixed: str = typer.Option("1-16", help="the fixed blocks to compare (1: plain decoding)"),
          tune: bool = typer.Option(False, help="tune each controller on the sweep's training side instead "
                                                "(concurrency-1 cells), held out against its defaults"),
          default: str = typer.Option(DEFAULT_POLICY, help="the baseline: adaptive (the default's guard) on "
                                                           "an imported store (no prefill logits)"),
          own: bool = typer.Option(True, help="a cell under the sweep's own table (--no-own: an unpriced "
                                              "import)"),
          fmt: OutputFormat = FormatOption) -> None:
    """The field's controllers at their defaults beside the fixed blocks, the default, BlockPilot and the
    oracles, per cost table and concurrency; the default's paired ratio over each (modelled, exact replay)."""
    from benchmarks.field import Cell, bench_field, bench_tune, holds
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.costs import CostTable
    from specpolicy.replay.batch_costs import BatchCostTable

    if concurrency is not None and not served:
        raise fail("--concurrency serves with a batch cost table: pass --served FILE too")
    levels = parse_candidates(concurrency or "1,8,64", "--concurrency", block_sizes=False) if served else []
    for table in costs:  # every table read before any replay (a bad one is refused in one line)
        CostTable.load(table)
    if served:
        BatchCostTable.load(served).check_batches(levels)
    cells = [*([Cell("own")] if own else []), *(Cell(Path(c).stem, Path(c)) for c in costs),
             *(Cell(f"{Path(served).stem} c={c}", None, c, Path(served)) for c in levels)]
    if tune:
        emit(bench_tune(sweep, cells, list(parse_candidates(fixed, "--fixed"))), fmt,
             title=f"the field's controllers tuned on {sweep}'s training side, held out (modelled)")
        return
    verdicts = bench_field(sweep, cells, list(parse_candidates(fixed, "--fixed")), default)
    emit([v.to_dict() for v in verdicts], fmt, title=f"the field's controllers: {sweep}, modelled")
    for cell, beaten in holds(verdicts).items():
        stderr.print(f"{cell}: the default {'is beaten by ' + ', '.join(beaten) if beaten else 'holds'}")


guard_all(app)  # after every command: each bad input becomes one line

if __name__ == "__main__":
    app()
