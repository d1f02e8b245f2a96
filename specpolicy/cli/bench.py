"""``specpolicy bench latency|batch-latency|serving-costs|gpu-check``: cost tables and an accelerator's check
(numbers, never test assertions; the project's own benchmarks: ``python -m benchmarks``, a checkout)."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy import defaults
from specpolicy.cli.common import (
    BenchPromptsOption,
    DatasetOption,
    DeviceOption,
    DrafterOption,
    DtypeOption,
    FormatOption,
    MaxNewTokensOption,
    OutputFormat,
    TargetOption,
    ThreadsOption,
    check_out_file,
    emit,
    fail,
    stderr,
)

app = typer.Typer(help="Cost tables of this machine, and an accelerator's check.", no_args_is_help=True)


@app.command("latency")
def latency(
    candidates: str = typer.Option(",".join(map(str, defaults.SHIPPED_SWEEP_CANDIDATES)),
                                   help="block sizes to price"),
    threads: int = ThreadsOption,
    repeats: int = typer.Option(defaults.LATENCY_REPEATS, min=4, help="interleaved repeats per block size"),
    context: int = typer.Option(defaults.LATENCY_CONTEXT, min=8, help="tokens already in the cache"),
    check_prompts: int = typer.Option(defaults.LATENCY_CHECK_PROMPTS, min=0,
                                      help="decode this many prompts to check modelled vs measured time"),
    strict: bool = typer.Option(False, help="exit with an error (and write nothing) when the table is "
                                            "flagged"),
    out: Path = typer.Option(None, help="save the table as JSON (e.g. for `compare --costs`)"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Measure this machine's cost table (draft, verify, AR step) robustly, flag noise, check on decodes."""
    from specpolicy.bench.latency import check_against_decodes, table_rows
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair
    from specpolicy.plugins.cycle_rules import snap
    from specpolicy.sweep.latency import measure_costs, pin_threads

    sizes = parse_candidates(candidates)
    check_out_file(out, "costs.json")
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    decoder = SpeculativeDecoder(pair.target, pair.drafter)
    stderr.print(f"measuring {len(sizes)} block sizes x {repeats} interleaved repeats at {threads} "
                 "thread(s) ...")
    costs = measure_costs(decoder, sizes, context_length=context, repeats=repeats)
    emit(table_rows(costs), fmt, title=f"cost table: {costs.machine}, {costs.threads} thread(s), "
                                       f"{costs.dtype}")
    for problem in costs.warnings:
        stderr.print(f"[yellow]warning:[/] {problem}")
    if check_prompts:
        ids = encode_prompts(pair.tokenizer, load_prompts("sharegpt", check_prompts, 0),
                             max_tokens=defaults.MAX_PROMPT_TOKENS)
        measured = snap(defaults.TRAINING_BLOCK_SIZE, [b for b in sizes if b > 1] or sizes)  # one it priced
        for check in check_against_decodes(decoder, costs, ids, measured):
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
    dataset: str = DatasetOption,
    max_new_tokens: int = MaxNewTokensOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """The shipped pair on a GPU vs CPU float32: outputs, cycles, replay = live, bf16 drift, speed."""
    from specpolicy.bench.gpu_check import gpu_check as run_checks
    from specpolicy.data.registry import load_prompts
    from specpolicy.models.loading import resolve_device

    chosen = load_prompts(dataset, prompts, 0)  # a bad --dataset is refused first, then the device
    resolve_device(device)  # an unknown or unavailable device fails here, before anything loads
    checks = run_checks(device, chosen, max_new_tokens)
    emit([c.row() for c in checks], fmt, title=f"specpolicy bench gpu-check ({device})")
    if any(c.passed is False for c in checks):
        raise typer.Exit(code=1)


@app.command("batch-latency")
def batch_latency(
    batch_sizes: str = typer.Option("1-8", help="batch sizes, e.g. 1-8 or 1,2,4,8"),
    lengths: str = typer.Option("1,2,4,8,16,32", help="tokens per sequence to time (verify lengths, block "
                                                      "sizes)"),
    repeats: int = typer.Option(defaults.BATCH_LATENCY_REPEATS, min=3, help="interleaved repeats per point"),
    context: int = typer.Option(defaults.BATCH_LATENCY_CONTEXT, min=8,
                                help="tokens already in each sequence's cache"),
    threads: int = ThreadsOption,
    out: Path = typer.Option(None, help="save the table as JSON (for `compare --concurrency N "
                                        "--batch-costs FILE`)"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Measure target and drafter passes over batches (the batch-aware cost model of serving simulations)."""
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair
    from specpolicy.sweep.batch_latency import measure_batch_costs
    from specpolicy.sweep.latency import pin_threads

    batches = parse_candidates(batch_sizes, "--batch-sizes", block_sizes=False)
    sizes = parse_candidates(lengths, "--lengths")
    check_out_file(out, "batch-costs.json")
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    stderr.print(f"timing {len(batches)} batch sizes x {len(sizes)} lengths x {repeats} repeats at "
                 f"{threads} thread(s)")
    table = measure_batch_costs(SpeculativeDecoder(pair.target, pair.drafter), batches, sizes, context,
                                repeats)
    rows = [{"batch": str(b),
             **{f"verify {n}": f"{1e3 * table.verify[b][n]:.1f}" for n in sorted(table.verify[b])},
             **{f"draft {n}": f"{1e3 * table.draft[b][n]:.1f}" for n in sorted(table.draft[b])}}
            for b in batches]
    emit(rows, fmt, title=f"ms per pass: {table.machine}, {table.threads} thread(s), {table.dtype}")
    for problem in table.check():
        stderr.print(f"[yellow]warning:[/] {problem}")
    if out is not None:
        table.save(out)
        stderr.print(f"batch cost table saved to {out}")


@app.command("serving-costs")
def serving_costs(
    model: str = typer.Option(..., help="target as aiconfigurator names it, e.g. Qwen/Qwen3-8B"),
    gpu: str = typer.Option(..., help="aiconfigurator system, e.g. h100_sxm, h200_sxm, b200_sxm"),
    engine: str = typer.Option("vllm", help="engine whose measured operators price it: vllm, sglang, trtllm"),
    drafter: str = typer.Option("dflash", help="priced as it drafts: dflash (a pass per block), eagle3 "
                                               "(a pass per drafted position)"),
    context: int = typer.Option(defaults.SERVING_CONTEXT, min=1, help="tokens already in each request's "
                                "cache"),
    batch_sizes: str = typer.Option(",".join(map(str, defaults.SERVING_BATCHES)), help="requests per step to "
                                    "price (the table stops where the GPU's KV cache is full)"),
    version: str = typer.Option(None, help="engine version of the operator data (default: aiconfigurator's)"),
    out: Path = typer.Option(..., help="save the batch cost table as JSON (for --batch-costs, or --costs at "
                                       "batch one)"),
) -> None:
    """A GPU's serving cost table from aiconfigurator's measured operators (modelled; no GPU needed)."""
    from specpolicy.bench.serving_costs import check_serving_arguments
    from specpolicy.bench.serving_costs import serving_costs as build
    from specpolicy.cli.sweep import parse_candidates

    batches = parse_candidates(batch_sizes, "--batch-sizes", block_sizes=False)
    try:
        check_serving_arguments(engine, drafter, context, batches)
    except ValueError as exc:
        raise fail(str(exc)) from None
    check_out_file(out, "serving-costs.json")
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError:
        raise fail("serving-costs needs aiconfigurator: pip install 'specpolicy[aiconfigurator]' (the "
                   "shipped tables in specpolicy/zoo/measured need nothing)") from None
    try:
        table = build(model, gpu, engine, drafter, context, batches, version=version)
    except ValueError as exc:
        raise fail(str(exc)) from None
    table.save(out)
    stderr.print(f"serving cost table saved to {out}: batches 1-{table.batch_sizes[-1]}: {table.capacity}; "
                 f"{table.source}")


@app.command("from-run")
def from_run(
    file: Path = typer.Argument(..., help="dflash-mlx's cycle_events.jsonl, a CSV of tokens,seconds per "
                                          "target verify, or a published curve's name (docs/real-data.md)"),
    draft_seconds: float = typer.Option(None, min=0.0, help="with a CSV: the drafter's pass you measured, "
                                                            "in seconds"),
    ar_seconds: float = typer.Option(None, min=0.0, help="the plain step's seconds, where the run has no "
                                                         "one-token verify"),
    out: Path = typer.Option(None, help="save the table as JSON (for `compare --costs`)"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """A cost table from an engine's own timings: verify cost by tokens verified, the drafter's pass by block,
    every cell's spread, and its cliffs (a width whose verify jumps past the trend)."""
    from specpolicy.bench.from_run import fit_csv, fit_cycles
    from specpolicy.files import shipped

    check_out_file(out, "costs.json")
    if not (file := shipped(file, defaults.MEASURED_DIR, ".csv", Path.is_file)).exists():
        curves = ", ".join(sorted(p.stem for p in defaults.MEASURED_DIR.glob("*.csv")))
        raise fail(f"no file {file}: pass dflash-mlx's cycle_events.jsonl, a CSV of tokens,seconds or a "
                   f"published curve ({curves})")
    if ar_seconds == 0 or (file.suffix.lower() == ".csv") != (draft_seconds is not None):
        raise fail("--ar-seconds must be above 0" if ar_seconds == 0 else
                   "a CSV of verifies needs --draft-seconds (the drafter's pass you measured); a cycle_events"
                   ".jsonl times its own drafts, so leave --draft-seconds out")
    if draft_seconds is not None:
        fitted = fit_csv(file, draft_seconds, ar_seconds)
    else:
        from specpolicy.sweep.traces.dflash_mlx import read_cycles

        fitted = fit_cycles([c for run in read_cycles(file).values() for c in run], str(file), ar_seconds)
    emit(fitted.rows(), fmt, title=f"cost table fitted from {file.name} (plain step "
                                    f"{1e3 * fitted.table.ar_seconds:.3f} ms)")
    for warning in [*fitted.table.warnings, *fitted.table.check()]:
        stderr.print(f"note: {warning}")
    if out is not None:
        fitted.table.save(out)
        stderr.print(f"cost table saved to {out}")
