"""``specpolicy bench batch-latency|verify|hf``: benchmarks of the verify-length and transformers paths."""

from __future__ import annotations

from pathlib import Path

import typer

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
    emit,
    fail,
    policy_names,
    stderr,
)
from specpolicy.defaults import (
    BATCH_LATENCY_CONTEXT,
    BATCH_LATENCY_REPEATS,
    MAX_PROMPT_TOKENS,
)


def batch_latency(
    batch_sizes: str = typer.Option("1-8", help="batch sizes, e.g. 1-8 or 1,2,4,8"),
    lengths: str = typer.Option("1,2,4,8,16,32", help="tokens per sequence to time (verify lengths, block sizes)"),
    repeats: int = typer.Option(BATCH_LATENCY_REPEATS, min=3, help="interleaved repeats per point"),
    context: int = typer.Option(BATCH_LATENCY_CONTEXT, min=8, help="tokens already in each sequence's cache"),
    threads: int = ThreadsOption,
    out: Path = typer.Option(None, help="save the table as JSON (for `compare --concurrency N --batch-costs FILE`)"),
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
    if out is not None and out.is_dir():
        raise fail(f"--out {out} is a folder; pass a file path such as {out / 'batch-costs.json'}")
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    stderr.print(f"timing {len(batches)} batch sizes x {len(sizes)} lengths x {repeats} repeats at {threads} thread(s)")
    table = measure_batch_costs(SpeculativeDecoder(pair.target, pair.drafter), batches, sizes, context, repeats)
    rows = [{"batch": str(b), **{f"verify {n}": f"{1e3 * table.verify[b][n]:.1f}" for n in sorted(table.verify[b])},
             **{f"draft {n}": f"{1e3 * table.draft[b][n]:.1f}" for n in sorted(table.draft[b])}} for b in batches]
    emit(rows, fmt, title=f"ms per pass: {table.machine}, {table.threads} thread(s), {table.dtype}")
    for problem in table.check():
        stderr.print(f"flagged: {problem}; compare and export refuse it without --allow-noisy (remeasure when the "
                     "machine is quiet)")
    if out is not None:
        table.save(out)
        stderr.print(f"batch cost table saved to {out}")


def verify(
    policies: str = typer.Option("threshold,marginal16,adaptive-verify", help="policies with verify rules"),
    prompts: int = BenchPromptsOption,
    candidates: str = typer.Option("1,2,4,8,16,32", help="block sizes the replay records"),
    max_new_tokens: int = MaxNewTokensOption,
    threads: int = ThreadsOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """(B, L) replay against live decoding, cycle for cycle, for policies that choose verify lengths."""
    from specpolicy.bench.verify import bench_verify
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
    with progress_bar("bench verify", len(ids)) as update:
        results = bench_verify(decoder, ids, sizes, built, costs, max_new_tokens, on_progress=update)
    emit([r.row() for r in results], fmt, title=f"(B, L) replay vs live: {len(ids)} held-out prompts, T = 0")
    for result in results:
        for note in result.notes:
            stderr.print(f"{result.policy}: {note}")


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
    from specpolicy.bench.hf_loop import bench_hf
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.prompts import encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.hf import require_dflash_support, resolve_policy
    from specpolicy.models import load_pair
    from specpolicy.models.loading import target_vocab_size
    from specpolicy.policy import check_vocabulary
    from specpolicy.sweep.latency import cached_costs, pin_threads

    require_dflash_support()
    names = policy_names(policies)
    if not names:
        raise fail("no policies given; e.g. --policies fixed16,blockpilot-guard")
    built = [resolve_policy(name) for name in names]
    check_vocabulary([p for p in built if not isinstance(p, int)], target_vocab_size(target), f"target {target!r}")
    chosen = load_prompts(dataset, prompts, 0)  # a bad --dataset is named before any model loads
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    ids = encode_prompts(pair.tokenizer, chosen, max_tokens=MAX_PROMPT_TOKENS)
    sizes = {b for p in built for b in ([p] if isinstance(p, int) else p.choices())}
    costs = cached_costs(SpeculativeDecoder(pair.target, pair.drafter), sizes, pair.metadata(), stderr.print)
    with progress_bar("bench hf", len(ids)) as update:
        rows = bench_hf(pair, ids, built, names, max_new_tokens, costs, on_progress=update)
    emit([r.row() for r in rows], fmt, title=f"decoder vs generate(): {len(ids)} prompts x {max_new_tokens} tokens, "
         f"{threads} thread(s), {dtype}")
