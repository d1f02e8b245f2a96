"""``specpolicy/BlockSize-v0``: one step per prompt, the action picks its block size (a contextual bandit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from specpolicy.defaults import COST_WEIGHT
from specpolicy.envs.episode import Episode
from specpolicy.envs.replay_data import OBSERVATION_BOUND
from specpolicy.envs.rewards import check_reward
from specpolicy.envs.sources import open_source


class BlockSizeEnv(gym.Env):
    """Observation: a prompt's prefill ``features``; action: a candidate index; reward: ``tau``, ``cost``,
    ``time`` or ``seconds``; ``backend`` ``replay`` (a sweep store, by default the zoo's) or ``live``."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, sweep: str | Path | None = None, features: str = "logits", reward: str = "tau",
                 backend: str = "replay", cost_weight: float = COST_WEIGHT, render_mode: str | None = None,
                 live: dict | None = None, split: str | None = None) -> None:
        if render_mode is not None:
            # a TypeError, as for an unsupported argument: stable-baselines3's make_vec_env then retries
            # without it
            raise TypeError("BlockSize-v0 has no render modes; pass render_mode=None")
        check_reward(reward, "prompt", backend)
        self.features = features
        self.source = open_source(backend, sweep, split, live, features, reward, cost_weight)
        self.candidates = self.source.candidates
        dim = self.source.observation_size
        self.observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (dim,), np.float32)
        self.action_space = spaces.Discrete(len(self.candidates))
        self._episode: Episode | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._episode = self.source.episode(self.np_random, (options or {}).get("prompt_index"))
        return self._episode.observation.copy(), {"prompt_id": self._episode.prompt_id}

    def step(self, action):
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(np.int64(action) if np.isscalar(action) else action):
            raise ValueError(f"invalid action {action!r}: expected an integer in [0, {len(self.candidates)})")
        episode, self._episode = self._episode, None
        reward, info = self.source.outcome(episode, int(action))
        return episode.observation.copy(), float(reward), True, False, info
