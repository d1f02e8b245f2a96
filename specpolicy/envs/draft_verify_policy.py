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
from specpolicy.envs.agent_policy import StepAgentPolicy
from specpolicy.envs.draft_verify_step import draft_verify_observation
from specpolicy.policy import PromptObservation
from specpolicy.state import DecodeState

Agent = Callable[[np.ndarray], int]
"""observation [22 + 2 (Bmax - 1)] -> action index into the candidates"""


class DraftVerifyAgentPolicy(StepAgentPolicy):
    """B before every cycle and L after every draft, both from a trained agent (greedy)."""

    name = "draft-verify-agent"

    def __init__(self, agent: Agent, candidates: Sequence[int], budget: int) -> None:
        super().__init__(candidates, budget)
        self.agent = agent

    def _act(self, state: DecodeState, prefill: np.ndarray, block: DraftedBlock | None) -> int:
        features = draft_verify_observation(state, self.candidates, self.budget, prefill, block)
        return self.candidates[int(self.agent(features))]

    def choose(self, state: DecodeState, prefill: np.ndarray) -> int:
        return self._act(state, prefill, None)

    def verify_rule(self, observation: PromptObservation) -> VerifyRule:
        prefill = self.prefill_features(observation)

        def rule(state: DecodeState, confidences: Sequence[float]) -> int:
            size = len(confidences) + 1
            if size == 1:
                return 1
            return min(size, self._act(state, prefill, DraftedBlock(size, tuple(confidences))))

        return rule

    def confidence_sizes(self) -> set[int]:
        return {b for b in self.candidates if b > 1}
