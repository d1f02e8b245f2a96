"""A serving simulation (modelled, no torch): ``concurrency`` slots each run a request's replay, a step costs
one batched drafter and one batched target pass shared equally by its requests, finished slots refill (with
copies of the requests once all have started: a server at that concurrency, no drain)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specpolicy.arguments import check_count
from specpolicy.cycles import CycleRecord, Plan, run_cycle
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.replay.session import ReplaySession
from specpolicy.replay.table import ReplayTable
from specpolicy.state import DecodeState


@dataclass
class ServingResult:
    """Per-request tokens and seconds (step time shared by the requests in each step), and the totals."""

    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    total_seconds: float = 0.0
    """wall seconds until the last request finished"""
    steps: int = 0
    cycles: list[int] = field(default_factory=list)
    records: list[CycleRecord] = field(default_factory=list)
    """every cycle run, in order"""

    def tau(self, request: int) -> float:
        """tau of one request: tokens committed per cycle (:func:`~specpolicy.state.mean_acceptance`)."""
        return self.tokens[request] / self.cycles[request] if self.cycles[request] else 0.0

    @property
    def throughput(self) -> float:
        """Output tokens per second served: the requests' tokens over their shares of the steps."""
        seconds = sum(self.seconds)
        return sum(self.tokens) / seconds if seconds else 0.0


@dataclass
class _Active:
    index: int
    session: ReplaySession
    plan: Plan
    counted: bool
    """a request of the results (else a copy holding a slot after every request started)"""


def simulate_serving(tables: Sequence[ReplayTable], plans: Sequence[Callable[[], Plan]],
                     costs: BatchCostTable, concurrency: int, sizes: Sequence[int] = ()) -> ServingResult:
    """Serve ``tables`` in order through ``concurrency`` slots; ``plans[i]()`` makes request i's
    :class:`Plan`; ``sizes``: the block sizes each batch's prices cover (none: not priced). Once all requests
    have started, freed slots take copies of them in order (in the steps and the engine's pooled cycles, not
    the results), so no batch drains."""
    concurrency = check_count(concurrency, "concurrency")
    n = len(tables)
    result = ServingResult(tokens=[0] * n, seconds=[0.0] * n, cycles=[0] * n)
    left, started, active = n, 0, []
    pooled = DecodeState.after_prefill(None, 0)
    prices = costs.at_concurrency(concurrency, sizes) if sizes else None  # every step holds the concurrency
    while left:
        while len(active) < concurrency:
            i, counted = started % n, started < n
            started += 1
            session = tables[i].session()
            if session.done:  # finished by prefill: no cycle
                left -= counted
                if not left:
                    return result
                continue
            active.append(_Active(i, session, plans[i](), counted))
        for request in active:  # what the engine knows: the scheduled batch (vLLM's schedule keys on it), its
            state = request.session.state  # prices, and every request's cycles so far
            state.batch, state.batch_costs, state.pooled = concurrency, prices, pooled
        cycles = [run_cycle(request.session, request.plan) for request in active]
        for cycle in cycles:
            if cycle.committed:
                pooled.record(cycle.block_size, cycle.accepted, cycle.verify_length)
        _account(result, active, cycles, costs)
        left -= sum(r.counted and r.session.done for r in active)
        active = [r for r in active if not r.session.done]
    return result


def _account(result: ServingResult, active: list[_Active], cycles: list[CycleRecord],
             costs: BatchCostTable) -> None:
    """One step's ``cycles`` priced by ``costs``, its time shared by its requests, added to theirs."""
    step = costs.step_seconds([(c.block_size, c.verify_length) for c in cycles])
    result.total_seconds, result.steps = result.total_seconds + step, result.steps + 1
    for request, cycle in zip(active, cycles):
        if not request.counted:
            continue
        result.records.append(cycle)
        result.tokens[request.index] += cycle.committed
        result.seconds[request.index] += step / len(active)
        result.cycles[request.index] += 1
