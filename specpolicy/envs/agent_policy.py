"""The shell every agent trained on a step environment runs in as a per-cycle specpolicy policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from specpolicy.features import compact
from specpolicy.policy import Policy, PromptObservation
from specpolicy.state import DecodeState


class StepAgentPolicy(Policy):
    """A per-cycle policy choosing B from what a step environment observes of the decode.

    Subclasses implement :meth:`choose`; the prompt's compact prefill features [13] (the environments'
    last 13 observation columns) are computed once per prompt. ``budget``: the decodes' max_new_tokens
    (the observation's share of the budget used).
    """

    per_step = True

    def __init__(self, candidates: Sequence[int], budget: int) -> None:
        super().__init__(candidates)
        self.budget = budget

    def choose(self, state: DecodeState, prefill: np.ndarray) -> int:
        """The block size of the next cycle (one of :attr:`candidates`)."""
        raise NotImplementedError

    @staticmethod
    def prefill_features(observation: PromptObservation) -> np.ndarray:
        """The compact prefill features [13] of a prompt, as the step environments observe them."""
        return compact(observation.logits, [observation.prompt_length])[0]

    def select(self, observation: PromptObservation) -> int:
        """The first cycle's block size (the state right after prefill)."""
        return self.schedule(observation)(DecodeState(observation.logits, observation.prompt_length,
                                                      observation.prompt_length, 0, 1))

    def schedule(self, observation: PromptObservation) -> Callable[[DecodeState], int]:
        prefill = self.prefill_features(observation)
        return lambda state: self.choose(state, prefill)
