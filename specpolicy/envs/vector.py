"""A natively vectorised ``BlockSize-v0`` on replay: numpy-batched, same-step autoreset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from specpolicy.defaults import COST_WEIGHT, NUM_ENVS
from specpolicy.envs.replay_data import OBSERVATION_BOUND, ReplayData


class BlockSizeVectorEnv(VectorEnv):
    """``num_envs`` one-step bandit episodes per call; ``infos`` carries ``block_size``, ``tau``."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, num_envs: int = NUM_ENVS, sweep: str | Path | None = None, features: str = "logits",
                 reward: str = "tau", cost_weight: float = COST_WEIGHT, render_mode: str | None = None,
                 split: str | None = None) -> None:
        self.source = ReplayData.load(sweep, features, reward, cost_weight, split)
        self.features = features
        self.num_envs = num_envs
        self.candidates = self.source.candidates
        dim = self.source.observation_size
        self.single_observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (dim,), np.float32)
        self.single_action_space = spaces.Discrete(len(self.candidates))
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = render_mode
        self._rng = np.random.default_rng()
        self._index = np.zeros(num_envs, dtype=np.int64)
        self._sizes = np.asarray(self.candidates)

    def prompt_indices(self) -> np.ndarray:
        """Which stored prompt each sub-environment currently shows: [num_envs]."""
        return self._index

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._index = self._rng.integers(len(self.source.prompt_ids), size=self.num_envs)
        return self.source.observations[self._index], {}

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.num_envs,) or actions.min() < 0 or actions.max() >= len(self.candidates):
            raise ValueError(f"actions must be {self.num_envs} integers in [0, {len(self.candidates)})")
        rewards = self.source.rewards[self._index, actions]
        infos = {"block_size": self._sizes[actions], "tau": self.source.taus[self._index, actions]}
        self._index = self._rng.integers(len(self.source.prompt_ids), size=self.num_envs)
        terminated = np.ones(self.num_envs, dtype=bool)
        return (self.source.observations[self._index], rewards.astype(np.float64), terminated,
                np.zeros(self.num_envs, dtype=bool), infos)
