"""The default's shape: a per-prompt policy picks the start, the cost-aware ``adaptive`` rule guards every
cycle after it (``blockpilot-guard``: BlockPilot's start)."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.plugins.cycle_rules import AdaptivePolicy, snap
from specpolicy.policy import Answers, Plan, Policy, PromptObservation


class GuardedPolicy(Policy):
    """A per-prompt policy picks the start, the ``adaptive`` rule guards every cycle after (a start of B = 1
    begins as after a failed probe; where the guard would then never probe, the prompt is plain decoding)."""

    per_step = True

    def __init__(self, start_policy: Policy, candidates: Sequence[int]) -> None:
        super().__init__(candidates)
        self.start_policy = start_policy
        self._guards = {b: AdaptivePolicy(self.candidates, start=max(b, 2)) for b in self.candidates}

    def choices(self) -> set[int]:
        """Its candidates: the start policy's choice is snapped to them."""
        return set(self.candidates)

    def restrict(self, offered: Sequence[int]) -> GuardedPolicy:
        """A learned start policy chooses only among ``offered`` (an engine that cannot run the others)."""
        self.start_policy.restrict(offered)
        return self

    def select(self, observation: PromptObservation) -> int:
        return self.start_policy.select(observation)

    def vocabulary(self) -> int | None:
        return self.start_policy.vocabulary()

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """The start policy's B first; then the guard, which reads a failed probe before a start of B = 1."""
        start = snap(self.start_policy.select(observation), self.candidates)  # an engine's sizes may be fewer
        guard = self._guards[start]  # one per start: it plans once per cost table
        guard.name = self.name
        return guard.planned(observation, start, guard.start if start == 1 else 0, probe_first=start == 1)
