"""``specpolicy/BlockSize-v0``: one step per prompt, the action picks its block size (a contextual bandit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from specpolicy.arrays import to_numpy
from specpolicy.defaults import COST_WEIGHT
from specpolicy.envs.replay_data import OBSERVATION_BOUND, ReplayData, prompt_features
from specpolicy.envs.rewards import check_reward


class BlockSizeEnv(gym.Env):
    """Observation: prefill features of a prompt (``features``: logits, normalised, softmax or compact).
    Action: index into the candidate block sizes. Reward (:mod:`~specpolicy.envs.rewards`): tau (default),
    ``cost`` (a cost-aware tau), ``time`` (tokens/s) or ``seconds`` (replay). ``info``: chosen block size,
    per-cycle accepted lengths, tau, prompt id.

    Backends: ``replay`` (deterministic, from a sweep store; default: the zoo's shipped training sweep,
    ``split="test"`` for its held-out prompts) and
    ``live`` (decodes each prompt with the target and drafter; wall-clock rewards).
    """

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, sweep: str | Path | None = None, features: str = "logits", reward: str = "tau",
                 backend: str = "replay", cost_weight: float = COST_WEIGHT, render_mode: str | None = None,
                 live: dict | None = None, split: str = "train") -> None:
        if render_mode is not None:
            # a TypeError, as for an unsupported argument: stable-baselines3's make_vec_env then retries without it
            raise TypeError("BlockSize-v0 has no render modes; pass render_mode=None")
        check_reward(reward, "prompt", backend)
        self.backend, self.features = backend, features
        if backend == "replay":
            self.data = ReplayData.load(sweep, features, reward, cost_weight, split)
            self.candidates = self.data.candidates
            dim = self.data.observations.shape[1]
        else:
            from specpolicy.envs.live import LiveSource

            self.live, self.cost_weight = LiveSource(**(live or {})), cost_weight
            self.candidates = self.live.candidates
            self.reward = reward
            dim = self._observe(self.live.start(np.random.default_rng(0))[0]).shape[0]
        self.observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (dim,), np.float32)
        self.action_space = spaces.Discrete(len(self.candidates))
        self._index = 0
        self._obs: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.backend == "replay":
            if options and "prompt_index" in options:
                self._index = int(options["prompt_index"])
            else:
                self._index = int(self.np_random.integers(len(self.data.prompt_ids)))
            self._obs = self.data.observations[self._index].copy()
            info = {"prompt_id": self.data.prompt_ids[self._index]}
        else:
            session, self._prompt_id, self._ids = self.live.start(self.np_random)
            self._obs, info = self._observe(session), {"prompt_id": self._prompt_id}
        return self._obs.copy(), info

    def step(self, action):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(np.int64(action) if np.isscalar(action) else action):
            raise ValueError(f"invalid action {action!r}: expected an integer in [0, {len(self.candidates)})")
        action = int(action)
        size = self.candidates[action]
        if self.backend == "replay":
            table = self.data.tables[self._index]
            accepted = [c.accepted for c in table.simulate(size)] if table is not None else []
            reward = float(self.data.rewards[self._index, action])
            info = {"block_size": size, "accepted": accepted, "tau": float(self.data.taus[self._index, action]),
                    "prompt_id": self.data.prompt_ids[self._index]}
        else:
            reward, info = self._decode(size)
        obs = self._obs.copy()
        self._obs = None
        return obs, float(reward), True, False, info

    def _observe(self, session) -> np.ndarray:
        """The prefill features of a live session [d], clipped as the replay observations are."""
        lengths = np.array([session.state.prompt_length])
        return prompt_features(self.features, to_numpy(session.state.prefill_logits)[None], lengths)[0]

    def _decode(self, size: int) -> tuple[float, dict]:
        """Decode the episode's prompt afresh at ``size``: the measured reward and the info."""
        trace = self.live.decoder.generate(self._ids, size)
        rewards = {"tau": trace.tau, "cost": trace.tau - self.cost_weight * (size - 1), "time": trace.tokens_per_second}
        return rewards[self.reward], {"block_size": size, "accepted": [c.accepted for c in trace.cycles],
                                      "tau": trace.tau, "decode_seconds": trace.decode_seconds,
                                      "prompt_id": self._prompt_id}
