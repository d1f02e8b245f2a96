"""dflash-mlx's per-cycle diagnostics, ``cycle_events.jsonl`` (``CycleCompleteEvent.to_payload``,
``dflash_mlx/engine/events.py`` @61d4f0b; docs/real-data.md): a run at one fixed block replays exactly at that
block, priced by a table fitted from its ``draft_us`` and ``verify_us`` (:mod:`specpolicy.bench.from_run`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import common
from specpolicy.sweep.traces.common import TraceImport, per_step_record, store_meta

FORMAT = "dflash-mlx-cycles"
FIELDS = ("request_id", "cycle", "block_len", "commit_count", "acceptance_len", "draft_us", "verify_us")


@dataclass(frozen=True)
class Cycle:
    """One dflash-mlx cycle: the block drafted, the tokens verified (L), drafts accepted and its seconds."""

    request: str
    number: int
    block: int
    verified: int
    accepted: int
    draft_seconds: float
    verify_seconds: float


def cycle_event(file: Path, line_number: int, line: bytes) -> Cycle:
    """One line's :class:`Cycle`; a ValueError naming the line and the problem otherwise."""
    body, where = common.json_line(file, line_number, line)
    missing = [name for name in FIELDS if name not in body]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}: not a dflash-mlx cycle event (run the server "
                         "with DFLASH_BENCH_LOG_DIR set and import its cycle_events.jsonl)")
    block, commit, accepted = body["block_len"], body["commit_count"], body["acceptance_len"]
    verified = body.get("verify_token_count", block)
    draft, verify = body["draft_us"], body["verify_us"]
    numbers = [body["cycle"], block, commit, accepted, verified]
    timed = all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
                for t in (draft, verify))
    problem = ("cycle, block_len, commit_count, acceptance_len and verify_token_count must be integers >= 0"
               if not common.counts(numbers, 0) else
               f"block_len must be in 1..{MAX_BLOCK_SIZE}" if not 1 <= block <= MAX_BLOCK_SIZE else
               "commit_count must be acceptance_len + 1" if commit != accepted + 1 else
               "acceptance_len must be below verify_token_count, itself at most block_len"
               if not accepted < verified <= block else
               "draft_us and verify_us must be finite numbers" if not timed else
               "verify_us must be above 0 (and draft_us too where the cycle drafted)"
               if verify <= 0 or draft < 0 or (block > 1 and draft == 0) else None)
    if problem:
        raise ValueError(f"{where} (request {body['request_id']}): {problem}; the file is damaged")
    request = common.request_id(body, "request_id", where)
    return Cycle(request, body["cycle"], block, verified, accepted, draft / 1e6, verify / 1e6)


def read_cycles(file: str | Path) -> dict[str, list[Cycle]]:
    """Every request's cycles in order; a ValueError for a cycle repeated or out of order."""
    file = common.trace_file(file, "dflash-mlx's cycle_events.jsonl (DFLASH_BENCH_LOG_DIR)")
    runs: dict[str, list[Cycle]] = {}
    for number, line in common.jsonl_lines(file):
        cycle = cycle_event(file, number, line)
        done = runs.setdefault(cycle.request, [])
        if done and cycle.number <= done[-1].number:
            raise ValueError(f"{file}, line {number}: request {cycle.request} repeats or reorders cycle "
                             f"{cycle.number}; import one run's file (two runs' events were mixed)")
        done.append(cycle)
    if not runs:
        raise ValueError(f"{file} holds no cycle events")
    return runs


def run_block(file: Path, runs: dict[str, list[Cycle]]) -> int:
    """The one block the run drafted (smaller only where the request's budget capped its last cycles, each the
    tokens left); a ValueError for an adaptive run or one whose verifies were cut."""
    size = max(c.block for run in runs.values() for c in run)
    for request, run in runs.items():
        first = next((i for i, c in enumerate(run) if c.block < size), len(run))  # the budget's first cap
        tail = zip(run[first:], run[first + 1:])
        if any(c.block != before.block - before.accepted - 1 for before, c in tail):
            raise ValueError(f"{file} (request {request}): blocks of {sorted({c.block for c in run})} in "
                             "one request: an adaptive run (--verify-mode adaptive); replay needs one fixed "
                             "block (--verify-mode dflash); `specpolicy bench from-run` fits its costs")
        if any(c.verified < c.block for c in run):
            raise ValueError(f"{file} (request {request}): verify_token_count below block_len (a "
                             "verify_len_cap): what the cut drafts would have done is unknown; record with "
                             "the whole block verified")
    return size


def import_dflash_mlx(file: str | Path, out: str | Path, block_size: int | None = None,
                      dataset: str | None = None) -> TraceImport:
    """dflash-mlx's ``cycle_events.jsonl`` of one fixed block into a store of its requests' recorded decodes,
    priced by a cost table fitted from its own cycles' timings."""
    from specpolicy.bench.from_run import fit_cycles

    runs = read_cycles(file)  # checks the file is one
    file = Path(file)
    size = run_block(file, runs)
    if block_size not in (None, size):
        raise ValueError(f"{file}: the run drafted blocks of {size}; pass --candidates {size} or leave it "
                         "out")
    try:
        fitted, why = fit_cycles([c for run in runs.values() for c in run], str(file)), ""
    except ValueError as error:  # one verify width and no plain step: the decodes import, unpriced
        fitted, why = None, f"; unpriced: {error} to `specpolicy bench from-run` (its table: --costs)"
    dataset = dataset or file.stem
    store = SweepStore.fill(out, store_meta(file, dataset, FORMAT, [size], training_block_size=size), (
        per_step_record(index, f"{dataset}:{request}", [c.accepted + 1 for c in run], None, dataset,
                        f"{dataset}:{request}", size)
        for index, (request, run) in enumerate(runs.items())))
    if fitted is not None:
        store.write_latency(fitted.table)
    cycles = sum(len(run) for run in runs.values())
    return TraceImport(store, len(runs), max(c.accepted for run in runs.values() for c in run), [], {},
                       f"the recorded decode at B = {size} ({cycles} cycles)"
                       + (why or ", priced by the table fitted from its own timings (latency.json)"))
