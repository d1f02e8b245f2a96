"""The per-cycle schedule of Hugging Face assisted generation, applied to the block size."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.arguments import check_no_argument
from specpolicy.plugins.cycle_rules import snap
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation
from specpolicy.state import DecodeState


class HeuristicPolicy(Policy):
    """Start at the training block size; +2 after a fully accepted block, -1 otherwise (on a sparse candidate
    set, to the nearest candidate at least that far in that direction)."""

    per_step = True

    def __init__(self, candidates: Sequence[int], start: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.start = snap(start, self.candidates)

    def select(self, observation: PromptObservation) -> int:
        return self.start

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        if not state.block_size_history:
            return self.select(observation)
        last, accepted = state.block_size_history[-1], state.accepted_history[-1]
        if accepted == last - 1:  # +2, or the next larger candidate when the set is sparse
            return min((c for c in self.candidates if c >= last + 2), default=self.candidates[-1])
        return max((c for c in self.candidates if c <= last - 1), default=self.candidates[0])


def heuristic_policy(arg: str | None, candidates: Sequence[int]) -> HeuristicPolicy:
    check_no_argument(arg, "heuristic")
    return HeuristicPolicy(candidates)
