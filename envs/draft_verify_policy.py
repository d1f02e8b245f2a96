"""An agent trained on ``DraftVerifyStep-v0`` as a deployable specpolicy policy (live, replay, ``compare``).

The agent is any callable from the environment's observation to an action index (a stable-baselines3
model's ``predict``, a torch actor, a rule): the policy rebuilds the observation from the decode's
state before every cycle (B) and from the drafted block (L), so it runs wherever specpolicy policies
run, with the verify step reading the same confidences live and in replay.

    model = PPO.load("ppo-draft-verify")
    policy = DraftVerifyAgentPolicy(lambda obs: model.predict(obs, deterministic=True)[0],
                                    env.unwrapped.candidates, budget=128)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from specpolicy.cycles import DraftedBlock, VerifyRule
from specpolicy.envs.draft_verify_step import draft_verify_observation
from specpolicy.features import compact
from specpolicy.policy import Policy, PromptObservation
from specpolicy.state import DecodeState

Agent = Callable[[np.ndarray], int]
"""observation [22 + 2 (Bmax - 1)] -> action index into the candidates"""


class DraftVerifyAgentPolicy(Policy):
    """B before every cycle and L after every draft, both from a trained agent (greedy)."""

    name = "draft-verify-agent"
    per_step = True

    def __init__(self, agent: Agent, candidates: Sequence[int], budget: int) -> None:
        super().__init__(candidates)
        self.agent, self.budget = agent, budget

    def _prefill(self, observation: PromptObservation) -> np.ndarray:
        return compact(observation.logits[None], np.array([observation.prompt_length]))[0]

    def _act(self, state: DecodeState, prefill: np.ndarray, block: DraftedBlock | None) -> int:
        features = draft_verify_observation(state, self.candidates, self.budget, prefill, block)
        return self.candidates[int(self.agent(features))]

    def select(self, observation: PromptObservation) -> int:
        return self.schedule(observation)(DecodeState(observation.logits, observation.prompt_length,
                                                      observation.prompt_length, 0, 1))

    def schedule(self, observation: PromptObservation):
        prefill = self._prefill(observation)
        return lambda state: self._act(state, prefill, None)

    def verify_rule(self, observation: PromptObservation) -> VerifyRule:
        prefill = self._prefill(observation)

        def rule(state: DecodeState, confidences: Sequence[float]) -> int:
            size = len(confidences) + 1
            if size == 1:
                return 1
            return min(size, self._act(state, prefill, DraftedBlock(size, tuple(confidences))))

        return rule

    def confidence_sizes(self) -> set[int]:
        return {b for b in self.candidates if b > 1}
