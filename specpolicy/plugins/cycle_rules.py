"""Per-cycle rules over the whole range of block sizes, B = 1 (no speculation) included: ``grow`` (the MLX
DFlash ports': up after a full accept, down to fit a short one) and ``adaptive`` (cost-aware: most expected
tokens per second from recent cycles, backing off to plain cycles where a cycle is slower than an AR step)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.defaults import (
    ACCEPTANCE_DECAY,
    ACCEPTANCE_PRIOR,
    ACCEPTANCE_PRIOR_WEIGHT,
    POOLED_ACCEPTANCE_DECAY,
)
from specpolicy.policy import TRAINING_BLOCK_SIZE, Answers, Plan, Policy, PromptObservation
from specpolicy.replay.lanes import CostAwareBlocks, lane_state
from specpolicy.state import DecodeState

MAX_WAIT = 64
"""the longest stretch of plain AR cycles after failed speculation"""
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


def required_costs(policy: Policy, observation: PromptObservation) -> CostTable:
    """The observation's cost table, or a ValueError naming the cost-aware ``policy`` and where to get one."""
    if observation.costs is None:
        raise ValueError(f"{policy.name} is cost-aware and needs the machine's cost table; evaluate it from "
                         "a sweep with latency.json or live (compare measures one), or pass costs in the "
                         "observation")
    return observation.costs


class AdaptivePolicy(Policy):
    """Cost-aware per-cycle choice: the most expected tokens per modelled second, re-probing after AR (its
    rule a value, :class:`~specpolicy.replay.lanes.CostAwareBlocks`)."""

    per_step = True

    def __init__(self, candidates: Sequence[int], start: int = TRAINING_BLOCK_SIZE,
                 prior: float = ACCEPTANCE_PRIOR, decay: float = ACCEPTANCE_DECAY,
                 first_wait: int = ADAPTIVE_FIRST_WAIT, full_wait_cost: float = FULL_WAIT_COST) -> None:
        super().__init__(candidates)
        self.start, self.prior, self.decay = snap(start, self.candidates), prior, decay
        self.first_wait, self.full_wait_cost = first_wait, full_wait_cost
        self._pooled, self._plans = (None, None), (None, {})  # (a cost table, what was priced with it)

    def select(self, observation: PromptObservation) -> int:
        return self.start

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        return self.planned(observation, self.start, 0, probe_first=True)

    def planned(self, observation: PromptObservation, start: int, seen_block: int, probe_first: bool) -> Plan:
        """The rule from ``start`` (after a failed probe of ``seen_block`` where > 0); with ``probe_first``,
        plain decoding where not even an optimistic first probe would pay (planned once per table)."""
        costs, key = required_costs(self, observation), (start, seen_block, probe_first)
        if self._plans[0] is not costs or key not in self._plans[1]:
            rule = self.rule(costs, start, seen_block, lambda state: self.batch_block(state, costs))
            s = rule.start(np.zeros(1, np.int64))
            never = probe_first and 1 in self.candidates and not rule.probes(s, rule.acceptance(s))[0]
            plans = self._plans[1] if self._plans[0] is costs else {}
            self._plans = (costs, {**plans, key: Plan.fixed(1) if never else Plan(rule)})
        return self._plans[1][key]

    def rule(self, costs: CostTable, start: int, seen_block: int,
             choose: Callable[[DecodeState], int | None] | None = None) -> CostAwareBlocks:
        """This rule as a value priced with ``costs``: its speculative candidates, waits scaled to the price
        of the training block (:data:`FULL_WAIT_COST`); ``choose``: a served rule run first."""
        drafted = [b for b in self.candidates if b > 1] or list(self.candidates)
        reference = costs.cycle_seconds(
            TRAINING_BLOCK_SIZE if TRAINING_BLOCK_SIZE in drafted else max(drafted))
        wait_scale = min(1.0, (reference / costs.cycle_seconds(1) - 1) / self.full_wait_cost)
        sizes = sorted({*drafted, start, seen_block} - {0, 1})
        return CostAwareBlocks(tuple(drafted), tuple((b, costs.cycle_seconds(b)) for b in sizes),
                               costs.cycle_seconds(1), 1 in self.candidates, start, seen_block, self.prior,
                               ACCEPTANCE_PRIOR_WEIGHT, self.decay, self.first_wait, MAX_WAIT, wait_scale,
                               PROBE_OPTIMISM, choose)

    def batch_block(self, state: DecodeState, costs: CostTable) -> int | None:
        """Served with a chain drafter, at any concurrency (``None`` elsewhere): the block every request of
        a step drafts, the fastest at the engine's pooled acceptance (:data:`POOLED_ACCEPTANCE_DECAY`) priced
        at the scheduled batch (docs: real data); where none beats plain steps, those the failures owe."""
        if state.pooled is None or costs.drafter != "chain":
            return None
        costs = state.batch_costs or costs
        if self._pooled[0] is not costs:  # priced once per table
            rule = replace(self.rule(costs, self.start, 0), decay=POOLED_ACCEPTANCE_DECAY, wait_scale=1.0)
            self._pooled = (costs, (rule, rule.start(np.zeros(1, np.int64))))
        rule, priced = self._pooled[1]
        s = lane_state(rule, state.pooled, lambda b, n: priced.prices[0, b], key="_pooled")  # at first prices
        (best,), (pays,) = rule.fastest(priced, rule.acceptance(s))
        return 1 if rule.owed(s)[0] and not pays and 1 in self.candidates else int(best)


def start_block_size(arg: str | None) -> int:
    """The start block size a rule's name carries (``grow8`` -> 8; none: the training block size)."""
    if arg is not None and not arg.isdigit():
        raise ValueError(f"the argument is the start block size, as in grow16 or adaptive8; got {arg!r}")
    return int(arg) if arg else TRAINING_BLOCK_SIZE


def grow_policy(arg: str | None, candidates: Sequence[int]) -> GrowShrinkPolicy:
    return GrowShrinkPolicy(candidates, start_block_size(arg))


def adaptive_policy(arg: str | None, candidates: Sequence[int]) -> AdaptivePolicy:
    return AdaptivePolicy(candidates, start_block_size(arg))
