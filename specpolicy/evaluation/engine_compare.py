"""The engine's own costs and its comparison (no torch): the cost table calibrated from the engine's timings,
the best stock llama.cpp flags priced with it, and :func:`compare_engine` (``compare --engine llamacpp``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from specpolicy.costs import CostTable, uniform_costs
from specpolicy.defaults import DEFAULT_MODEL, ENGINE_CALIBRATION_PROMPTS, STOCK_SETTINGS
from specpolicy.engines.llamacpp import ServerPool, Setting
from specpolicy.evaluation.engine import (
    FED,
    PLAIN,
    EngineRun,
    engine_sizes,
    evaluate_engine,
    plan_settings,
    trained_block,
)
from specpolicy.evaluation.metrics import PolicyResults
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.policy import Policy
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore


def calibrate(pool: ServerPool, store: SweepStore, records: Sequence[SweepRecord], threads: int,
              on_progress: Callable[[int, int], None] | None = None) -> CostTable:
    """The engine's own cost table from its timings on ``records`` (:func:`engine_costs`): every block size it
    runs, plain decoding, and on a patched server a plain step that still feeds the drafter."""
    from specpolicy.registry import create_policy

    sizes = engine_sizes(store.candidates, trained_block(store))
    run = evaluate_engine(pool, store, [create_policy(f"fixed{b}", sizes) for b in sizes], records=records,
                          on_progress=on_progress)
    if pool.per_request:
        for record in records:
            prompt, budget = list(record.replay.sequence[:record.prompt_length]), record.replay.budget
            run.replies[record.prompt_id, FED] = pool[FED].complete(prompt, budget or record.output_length)
    return engine_costs(run, threads)


@dataclass(frozen=True)
class StockSetting:
    """llama.cpp's own flags (``--spec-draft-n-max``, ``--spec-draft-p-min``) and their modelled speed."""

    n_max: int
    p_min: float
    speed: float = float("nan")

    @property
    def policy(self) -> str:
        """The ``llamacpp-pmin`` policy that runs these flags (in replay, or per request in the engine)."""
        return f"llamacpp-pmin:n_max={self.n_max},p_min={self.p_min}"


def best_stock_setting(store: SweepStore, costs: CostTable, sizes: Sequence[int]) -> StockSetting | None:
    """The fastest stock llama.cpp flags for this pair and machine (:data:`STOCK_SETTINGS`), by replay priced
    with the engine's own table, with their speed over plain decoding; ``None`` where the store replays no
    stock block. A p_min above 0 where it recorded the drafter's confidences."""
    from specpolicy.registry import create_policy

    confident = set(store.meta.get("confidence_sizes", []))
    grid = [StockSetting(n, p) for n in STOCK_SETTINGS[0] if n + 1 in sizes
            for p in STOCK_SETTINGS[1] if p == 0 or n + 1 in confident]
    if not grid:
        return None
    policies = [create_policy(s.policy, sizes) for s in grid]
    results = evaluate_replay(store, policies, costs=costs, candidates=sizes)
    priced = [StockSetting(s.n_max, s.p_min, r.speedup()) for s, r in zip(grid, results)]
    return max(priced, key=lambda s: s.speed)


def engine_costs(run: EngineRun, threads: int, machine: str = "") -> CostTable:
    """The engine's own cost table from ``run``'s timings: seconds per cycle at each block it decoded without
    a p_min cut, the drafter's pass apart where a patched server timed it (a cycle verifying fewer than B
    priced as the engine spends it), per plain step (the baseline) and per B = 1 cycle of a per-step plan on
    the DFlash server where the run has them (the drafter still takes every token; 15% dearer here)."""
    def replies(setting: Setting) -> list:
        return [reply for (_, s), reply in run.replies.items() if s == setting]

    def per_step(setting: Setting) -> float | None:
        chosen = replies(setting)
        return sum(r.seconds for r in chosen) / sum(r.cycles for r in chosen) if chosen else None

    def drafter(setting: Setting) -> float:
        timed = [s.draft_seconds for r in replies(setting) for s in r.steps if s.seconds > 0]
        return sum(timed) / len(timed) if timed else 0.0

    ar = per_step(PLAIN)
    whole = sorted({s.block_size for _, s in run.replies if s.block_size > 1 and s == Setting(s.block_size)})
    draft = {1: 0.0, **{b: drafter(Setting(b)) for b in whole}}
    verify = {1: per_step(FED) or ar, **{b: per_step(Setting(b)) - draft[b] for b in whole}}
    return CostTable(draft, verify, ar, threads=threads, dtype="float32", device="cpu",
                     machine=machine or "llama.cpp llama-server (measured from its own timings)")


Progress = Callable[[str, int], AbstractContextManager[Callable[[int, int], None]]]
"""``progress(description, total)``: a context giving ``update(done, total)`` (the CLI's ``progress_bar``)"""


@contextlib.contextmanager
def _quiet(description: str, total: int) -> Iterator[Callable[[int, int], None]]:
    yield lambda done, total: None


@dataclass(frozen=True)
class EngineComparison:
    """What :func:`compare_engine` measured in the engine, and replay's prediction under its table."""

    run: EngineRun
    modelled: list[PolicyResults]
    """replay of the same prompts priced with :attr:`costs`"""
    costs: CostTable
    """the engine's own (split) table, calibrated on the first prompts"""
    stock: StockSetting | None
    """the fastest stock llama.cpp flags by replay on :attr:`costs` (``None``: no stock block replays)"""


def compare_engine(store: SweepStore, policies: Sequence[Policy], *, threads: int = 1,
                   server: str | Path | None = None, target: str = DEFAULT_MODEL,
                   drafter: str = DEFAULT_MODEL,
                   progress: Progress = _quiet, report: Callable[[str], None] = print) -> EngineComparison:
    """``specpolicy compare --engine llamacpp`` from Python: every policy checked against what the server
    runs, the pair converted (cached), the engine's cost table calibrated on the store's first prompts, every
    prompt decoded in one server pool beside plain decoding, and replay's prediction under that table."""
    from specpolicy.engines.build import find_server, gguf_pair, patched

    binary = find_server(server)  # before any conversion or server
    records = list(store.records())
    stand_in = store.latency() or uniform_costs(store.candidates)  # the engine's own table prices the run
    plan_settings(store, records[:1], policies, stand_in, patched(binary))  # refused before any work
    folder = gguf_pair(target, drafter, report=report)
    sizes = engine_sizes(store.candidates, trained_block(store))
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", threads) as pool:
        with progress("engine costs", ENGINE_CALIBRATION_PROMPTS) as update:
            costs = calibrate(pool, store, records[:ENGINE_CALIBRATION_PROMPTS], threads, update)
        with progress(f"llama.cpp {store.path.name}", len(records)) as update:
            run = evaluate_engine(pool, store, policies, costs=costs, records=records, on_progress=update)
    modelled = evaluate_replay(store, policies, costs=costs, candidates=sizes)
    return EngineComparison(run, modelled, costs, best_stock_setting(store, costs, sizes))
