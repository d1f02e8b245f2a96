"""An agent trained on a specpolicy environment (a callable from observation to action index) as a policy
wherever policies run: :class:`AgentSpec` names the environment, :class:`AgentPolicy` rebuilds inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from specpolicy.cycles import Plan
from specpolicy.envs.replay_data import prompt_features
from specpolicy.features import compact, get_extractor
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.state import DecodeState, DraftedBlock

Agent = Callable[[np.ndarray], int]
"""observation [d] -> action index into the agent's candidates"""

GRANULARITIES = ("prompt", "cycle", "draft_verify")


def wrapper_chain(env: object) -> list[object]:
    """``env`` and every environment it wraps: stable-baselines3's ``venv`` (VecNormalize and the other vector
    wrappers), a DummyVecEnv's first ``envs``, specpolicy's SB3 vector env's ``env``, gymnasium's ``env``."""
    chain = [env]
    for _ in range(32):
        inner = (getattr(env, "venv", None) or (getattr(env, "envs", None) or [None])[0]
                 or getattr(env, "env", None))
        if inner is None or inner is env:
            break
        chain.append(env := inner)
    return chain


def specpolicy_env(env: object) -> object:
    """The specpolicy environment under any wrappers (the first in the chain with a source and candidates)."""
    for inner in wrapper_chain(env):
        if hasattr(inner, "source") and hasattr(inner, "candidates"):
            return inner
    raise ValueError(f"{type(env).__name__} wraps no specpolicy environment; pass the environment the agent "
                     "learned on (BlockSize-v0, BlockSizeStep-v0, DraftVerifyStep-v0 or their vector "
                     "versions)")


@dataclass(frozen=True)
class AgentSpec:
    """What an agent was trained on: ``granularity`` (``prompt``, ``cycle``, ``draft_verify``),
    ``candidates``, ``features``, ``budget`` (max_new_tokens) and ``observation_size``."""

    granularity: str
    candidates: tuple[int, ...]
    features: str = "compact"
    budget: int = 0
    observation_size: int = 0

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"unknown agent granularity {self.granularity!r}; use one of "
                             f"{', '.join(GRANULARITIES)}")
        if self.granularity != "prompt" and self.budget < 1:
            raise ValueError("a per-cycle agent needs the decodes' token budget (budget >= 1), got "
                             f"{self.budget}")
        get_extractor(self.features)  # an unknown feature name fails here, naming the known ones
        object.__setattr__(self, "candidates", tuple(int(c) for c in self.candidates))

    @classmethod
    def of_env(cls, env: object, budget: int | None = None) -> AgentSpec:
        """The spec of ``env`` (or of its wrapper): ``BlockSize-v0``, ``BlockSizeStep-v0``,
        ``DraftVerifyStep-v0`` or vector forms; ``budget``: the step environments' (default: the sweep's)."""
        env = specpolicy_env(env)
        size = int(np.prod(getattr(env, "single_observation_space", env.observation_space).shape))
        granularity = getattr(env, "granularity", "prompt")
        if granularity == "prompt":
            return cls("prompt", env.candidates, env.features, 0, size)
        if budget is None:
            budget = env.source.budget
        return cls(granularity, env.candidates, "compact", budget, size)

    def to_dict(self) -> dict:
        return {**asdict(self), "candidates": list(self.candidates)}


class AgentPolicy(Policy):
    """A trained agent (greedy) as a policy: B once per prompt, B per cycle, or B then L per cycle."""

    def __init__(self, agent: Agent, spec: AgentSpec, name: str = "agent") -> None:
        super().__init__(spec.candidates)
        self.agent, self.spec, self.name = agent, spec, name
        self.per_step = spec.granularity != "prompt"

    def vocabulary(self) -> int | None:
        """Per-prompt agents on raw logits read one vocabulary; compact features fit any target."""
        if self.spec.granularity == "prompt" and self.spec.features != "compact":
            return self.spec.observation_size or None
        return None

    def _act(self, observation: np.ndarray) -> int:
        return self.candidates[int(self.agent(observation))]

    def select(self, observation: PromptObservation) -> int:
        if self.spec.granularity == "prompt":
            lengths = np.array([observation.prompt_length])
            return self._act(prompt_features(self.spec.features, observation.logits[None], lengths)[0])
        return super().select(observation)

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """Per prompt: the agent's one choice. Per cycle: B from the step observation of each state; a
        draft-then-verify agent also picks L from the drafted block's confidences."""
        if self.spec.granularity == "prompt":
            return Plan.fixed(self.select(observation))
        prefill = compact(observation.logits, [observation.prompt_length])[0]
        plan = Plan(lambda state: self._act(self._observe(state, prefill, None)))
        if self.spec.granularity == "cycle":
            return plan
        return plan.with_length(lambda state, drafted: min(drafted.block_size,
                                                           self._act(self._observe(state, prefill, drafted))))

    def _observe(self, state: DecodeState, prefill: np.ndarray, block: DraftedBlock | None) -> np.ndarray:
        from specpolicy.envs.block_size_step import step_observation
        from specpolicy.envs.draft_verify_step import draft_verify_observation

        if self.spec.granularity == "cycle":
            return step_observation(state, self.candidates, self.spec.budget, prefill)
        return draft_verify_observation(state, self.candidates, self.spec.budget, prefill, block)

    def confidence_sizes(self) -> set[int]:
        return {b for b in self.candidates if b > 1} if self.spec.granularity == "draft_verify" else set()
