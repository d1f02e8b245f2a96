"""Per-cycle rules over the whole range of block sizes, B = 1 (no speculation) included: ``grow`` (the MLX
DFlash ports': up after a full accept, down to fit a short one) and ``adaptive`` (cost-aware: most expected
tokens per second from recent cycles, backing off to plain cycles where a cycle is slower than an AR step)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from specpolicy.costs import CostTable, expected_tokens
from specpolicy.cycles import CostAwareBlocks
from specpolicy.defaults import (
    ACCEPTANCE_DECAY,
    ACCEPTANCE_PRIOR,
    ACCEPTANCE_PRIOR_WEIGHT,
    POOLED_ACCEPTANCE_DECAY,
)
from specpolicy.policy import TRAINING_BLOCK_SIZE, Answers, Plan, Policy, PromptObservation
from specpolicy.state import DecodeState

MAX_WAIT = 64
"""the longest stretch of plain AR cycles after failed speculation"""
BEST_SIZE_MEMO = 65_536
"""the acceptance rates whose best block the cost-aware rule remembers per table (cleared when full: a long
served run asks at ever new pooled rates)"""
ADAPTIVE_FIRST_WAIT = 4
"""``adaptive``'s first wait, chosen on the zoo's training sweep (4: 1.43x fixed16; 8: 1.41x; 16: 1.38x)"""
PROBE_OPTIMISM = 0.25
"""``adaptive`` speculates only where some block would beat AR at an optimistic acceptance (the estimated
rejection rate scaled by this; chosen on the zoo's training sweep: docs/benchmarks.md)"""
FULL_WAIT_COST = 1.3
"""``adaptive`` waits in full where a cycle of the training block size costs at least this many AR steps
beyond the one a cycle always makes, less on flatter tables (chosen on the training sweep: docs)"""


def snap(size: int, candidates: Sequence[int]) -> int:
    """The candidate nearest ``size`` (ties: the smaller)."""
    return min(candidates, key=lambda c: (abs(c - size), c))


def ar_wait(state: DecodeState, failed: Callable[[int, int], bool], first_wait: int, scale: float = 1.0,
            key: str = "") -> int | None:
    """Plain AR cycles still owed after failed speculation (``None``: speculate): after the n-th failed cycle,
    ``first_wait * 2**(n-1)`` (at most :data:`MAX_WAIT`) x ``scale``, rounded up; failures and trailing plain
    cycles folded on the state under ``key``, which names ``failed``."""
    def update(run: tuple[int, int], i: int) -> tuple[int, int]:
        size = state.block_size_history[i]
        if size == 1:
            return run[0], run[1] + 1
        return (run[0] + 1 if failed(size, state.accepted_history[i]) else 0), 0

    failures, trailing_ar = state.fold(f"_ar_wait{key}", (0, 0), update)
    if failures == 0:
        return None
    wait = max(1, math.ceil(min(MAX_WAIT, first_wait * 2 ** (failures - 1)) * scale))
    return wait - trailing_ar if trailing_ar < wait else None


class GrowShrinkPolicy(Policy):
    """Grow after a fully accepted block, shrink to what was accepted after a poor one."""

    per_step = True

    def __init__(self, candidates: Sequence[int], start: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.start = snap(start, self.candidates)

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        if not state.block_size_history:
            return self.start
        last, accepted = state.block_size_history[-1], state.accepted_history[-1]
        larger = [c for c in self.candidates if c > last]
        if accepted == last - 1:
            return larger[0] if larger else last
        if accepted + 1 < last / 2:
            return min((c for c in self.candidates if c >= accepted + 2), default=self.candidates[-1])
        return last


def acceptance_rate(state: DecodeState, prior: float = ACCEPTANCE_PRIOR,
                    prior_weight: float = ACCEPTANCE_PRIOR_WEIGHT, decay: float = ACCEPTANCE_DECAY) -> float:
    """Per-draft acceptance of a geometric model over the speculative cycles so far (older cycles weigh
    ``decay`` less each), its sums kept on the state and updated per cycle."""
    return acceptance_rates(state, (decay,), prior, prior_weight)[0]


_FOLD_KEYS: dict[tuple[float, ...], str] = {}


def acceptance_rates(state: DecodeState, decays: tuple[float, ...], prior: float = ACCEPTANCE_PRIOR,
                     prior_weight: float = ACCEPTANCE_PRIOR_WEIGHT) -> list[float]:
    """:func:`acceptance_rate` at each of ``decays``, in one fold."""
    lengths = state.verify_history if len(state.verify_history) == len(state.block_size_history) \
        else state.block_size_history

    def update(sums: tuple[tuple[float, float], ...], i: int) -> tuple[tuple[float, float], ...]:
        size, accepted = lengths[i], state.accepted_history[i]
        if size == 1:
            return sums
        tried = accepted + (accepted < size - 1)
        return tuple([(accepted + decay * successes, tried + decay * trials)
                      for decay, (successes, trials) in zip(decays, sums)])

    key = _FOLD_KEYS.get(decays) or _FOLD_KEYS.setdefault(decays, f"_acceptance_{decays}")
    folded = state.fold(key, ((0.0, 0.0),) * len(decays), update)
    return [min((prior * prior_weight + successes) / (prior_weight + trials), 0.999)
            for successes, trials in folded]


def required_costs(policy: Policy, observation: PromptObservation) -> CostTable:
    """The observation's cost table, or a ValueError naming the cost-aware ``policy`` and where to get one."""
    if observation.costs is None:
        raise ValueError(f"{policy.name} is cost-aware and needs the machine's cost table; evaluate it from "
                         "a sweep with latency.json or live (compare measures one), or pass costs in the "
                         "observation")
    return observation.costs


class _Prices(NamedTuple):
    """What the cost-aware rule reads of one cost table, priced once."""

    table: CostTable | None
    seconds: dict[int, float]
    """a cycle's seconds by speculative B"""
    wait_scale: float
    """the AR wait's scale (:data:`FULL_WAIT_COST`)"""
    ascending: list[tuple[int, float]]
    """(B, seconds) by ascending B"""
    wait_key: str
    """the key of the AR wait's fold on the state: this rule, this table"""
    best: dict[float, int]
    """:meth:`AdaptivePolicy.best_size` by acceptance, as asked (decodes revisit the same rates)"""


class AdaptivePolicy(Policy):
    """Cost-aware per-cycle choice: the most expected tokens per modelled second, re-probing after AR."""

    per_step = True

    def __init__(self, candidates: Sequence[int], start: int = TRAINING_BLOCK_SIZE,
                 prior: float = ACCEPTANCE_PRIOR,
                 decay: float = ACCEPTANCE_DECAY, first_wait: int = ADAPTIVE_FIRST_WAIT,
                 full_wait_cost: float = FULL_WAIT_COST) -> None:
        super().__init__(candidates)
        self.start = snap(start, self.candidates)
        self.prior, self.decay = prior, decay
        self.first_wait, self.full_wait_cost = first_wait, full_wait_cost
        self._priced = _Prices(None, {}, 1.0, [], "", {})

    def select(self, observation: PromptObservation) -> int:
        return self.start

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """The rule from the first cycle; plain decoding where not even an optimistic first probe would pay
        (:meth:`probe_pays` at the prior acceptance: a first probe at the start block would only lose)."""
        if 1 in self.candidates and not self.probe_pays(self.prior, required_costs(self, observation)):
            return Plan.fixed(1)
        return Plan(self.rule(observation, self.start, 0, lambda state: self.step(state, observation)))

    def rule(self, observation: PromptObservation, start: int, seen_block: int,
             choose: Callable[[DecodeState], int]) -> CostAwareBlocks:
        """This rule as a value (priced with the observation's table), ``choose`` running it in Python."""
        costs = required_costs(self, observation)
        prices = self._prices(costs)
        seconds, wait_scale = prices.seconds, prices.wait_scale
        sizes = sorted({*seconds, start, seen_block} - {0, 1})
        return CostAwareBlocks(tuple(seconds), tuple((b, costs.cycle_seconds(b)) for b in sizes),
                               costs.cycle_seconds(1), 1 in self.candidates, start, seen_block, self.prior,
                               ACCEPTANCE_PRIOR_WEIGHT, self.decay, self.first_wait, MAX_WAIT, wait_scale,
                               PROBE_OPTIMISM, choose)

    def _prices(self, costs: CostTable) -> _Prices:
        """This rule's prices under ``costs``, priced once per table (one table per prompt)."""
        if self._priced.table is not costs:
            drafted = [b for b in self.candidates if b > 1] or list(self.candidates)
            seconds = {b: costs.cycle_seconds(b) for b in drafted}
            reference = seconds.get(TRAINING_BLOCK_SIZE, seconds[max(seconds)])
            wait_scale = min(1.0, (reference / costs.cycle_seconds(1) - 1) / self.full_wait_cost)
            key = f"{id(self)}:{id(costs)}"
            self._priced = _Prices(costs, seconds, wait_scale, sorted(seconds.items()), key, {})
        return self._priced

    def best_size(self, alpha: float, costs: CostTable) -> int:
        """The speculative candidate (B > 1) with the most expected tokens per cycle second."""
        prices = self._prices(costs)
        best = prices.best.get(alpha)
        if best is None:
            most = -1.0
            for size, seconds in prices.ascending:  # a tie keeps the smaller block
                rate = (1 - alpha**size) / seconds  # expected_tokens x (1 - alpha), the same for every B
                if rate > most:
                    best, most = size, rate
            if len(prices.best) >= BEST_SIZE_MEMO:
                prices.best.clear()
            prices.best[alpha] = best
        return best

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        costs = required_costs(self, observation)
        batched = self.batch_block(state, observation)
        if batched is not None:
            return batched
        if not state.block_size_history:
            return self.start
        alpha = acceptance_rate(state, self.prior, decay=self.decay)
        best = self.best_size(alpha, costs)  # prices the candidates once per table
        failed = 1 in self.candidates and ar_wait(state, self.cycle_failed(costs), self.first_wait,
                                                  self._priced.wait_scale, self._priced.wait_key) is not None
        pays = self.beats_ar(expected_tokens(alpha, best), best, costs)  # then at any higher acceptance too
        if failed and not pays:
            return 1  # a failed cycle, and the acceptance model expects AR to be faster: back off
        if 1 in self.candidates and not pays and not self.probe_pays(alpha, costs):
            return 1  # not even an optimistic acceptance would make a block pay: no probe
        return best

    def batch_block(self, state: DecodeState, observation: PromptObservation) -> int | None:
        """Served with a chain drafter, at any concurrency (``None`` elsewhere): the block every request of
        a step drafts, the fastest at the engine's pooled acceptance (:data:`POOLED_ACCEPTANCE_DECAY`) priced
        at the scheduled batch (docs: real data); where no block beats plain steps, plain steps for a stretch
        doubling with each failed probe (:func:`ar_wait`, each cycle judged at the prices when first read)."""
        if state.pooled is None:
            return None
        costs = required_costs(self, observation)
        if costs.drafter != "chain":
            return None
        costs = state.batch_costs or costs
        alpha = acceptance_rate(state.pooled, self.prior, decay=POOLED_ACCEPTANCE_DECAY)
        best = self.best_size(alpha, costs)
        if self.beats_ar(expected_tokens(alpha, best), best, costs) or 1 not in self.candidates:
            return best
        waiting = ar_wait(state.pooled, self.cycle_failed(costs), self.first_wait, key="_pooled")
        return 1 if waiting is not None else best

    def beats_ar(self, tokens: float, size: int, costs: CostTable) -> bool:
        """Whether ``tokens`` from a cycle of ``size`` come at least as fast as from plain steps (the one
        test of this rule; the speculative sizes' prices cached per table)."""
        seconds = self._prices(costs).seconds
        return tokens / (seconds[size] if size in seconds else costs.cycle_seconds(size)) >= \
            1 / costs.cycle_seconds(1)

    def cycle_failed(self, costs: CostTable) -> Callable[[int, int], bool]:
        """``(B, accepted) -> bool``: whether a cycle committed its tokens slower than plain steps under
        ``costs`` (what :func:`ar_wait` counts, for a request's own cycles and the engine's alike)."""
        return lambda size, accepted: not self.beats_ar(accepted + 1, size, costs)

    def probe_pays(self, alpha: float, costs: CostTable) -> bool:
        """Whether some block beats AR at an optimistic acceptance (the rejection rate ``1 - alpha`` scaled by
        :data:`PROBE_OPTIMISM`); plain steps leave ``alpha`` as it is, so where this is false a decode that
        steps plainly never speculates again."""
        optimistic = 1 - (1 - alpha) * PROBE_OPTIMISM
        best = self.best_size(optimistic, costs)
        return self.beats_ar(expected_tokens(optimistic, best), best, costs)


def start_block_size(arg: str | None) -> int:
    """The start block size a rule's name carries (``grow8`` -> 8; none: the training block size)."""
    if arg is not None and not arg.isdigit():
        raise ValueError(f"the argument is the start block size, as in grow16 or adaptive8; got {arg!r}")
    return int(arg) if arg else TRAINING_BLOCK_SIZE


def grow_policy(arg: str | None, candidates: Sequence[int]) -> GrowShrinkPolicy:
    return GrowShrinkPolicy(candidates, start_block_size(arg))


def adaptive_policy(arg: str | None, candidates: Sequence[int]) -> AdaptivePolicy:
    return AdaptivePolicy(candidates, start_block_size(arg))
