"""The default's shape: a per-prompt policy picks the start, the cost-aware ``adaptive`` rule guards every
cycle after it (``blockpilot-guard``: BlockPilot's start)."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.plugins.cycle_rules import AdaptivePolicy, acceptance_rate, required_costs, snap
from specpolicy.policy import Answers, Plan, Policy, PromptObservation
from specpolicy.state import DecodeState


class GuardedPolicy(Policy):
    """A per-prompt policy picks the start, the ``adaptive`` rule guards every cycle after (a start of B = 1
    begins as after a failed probe; where the guard would then never probe, the prompt is plain decoding)."""

    per_step = True

    def __init__(self, start_policy: Policy, candidates: Sequence[int]) -> None:
        super().__init__(candidates)
        self.start_policy = start_policy

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
        guard = AdaptivePolicy(self.candidates, start=max(start, 2))
        guard.name = self.name
        # a start of B = 1: the guard sees a failed probe before the first cycle, then every cycle after it
        seen = DecodeState(observation.logits, observation.prompt_length, 0, 0, 1, [0], [guard.start],
                           [guard.start])
        if start == 1 and 1 in self.candidates:
            costs = required_costs(self, observation)
            if not guard.probe_pays(acceptance_rate(seen, guard.prior, decay=guard.decay), costs):
                return Plan.fixed(1)  # the guard would never probe: the prompt is plain decoding

        def choose(state: DecodeState) -> int:
            if start > 1:  # the guard from its own start block
                return guard.step(state, observation)
            batched = guard.batch_block(state, observation)
            if batched is not None:
                return batched
            if not state.block_size_history:
                return 1
            known = len(seen.block_size_history) - 1  # the decode's cycles the guard has seen
            seen.accepted_history += state.accepted_history[known:]
            seen.block_size_history += state.block_size_history[known:]
            seen.verify_history += state.verify_history[known:]
            seen.position, seen.cycle, seen.generated = state.position, state.cycle, state.generated
            return guard.step(seen, observation)

        return Plan(guard.rule(observation, start, guard.start if start == 1 else 0, choose))
