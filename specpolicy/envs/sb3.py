"""The numpy-batched ``BlockSize-v0`` as a stable-baselines3 ``VecEnv``; every step ends every episode, so
``dones`` is all true and ``infos[i]["terminal_observation"]`` is the observation the action answered::

    PPO("MlpPolicy", BlockSizeSB3VecEnv(num_envs=64, features="compact", reward="seconds"),
    n_steps=16).learn(50_000) """

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from specpolicy.defaults import NUM_ENVS
from specpolicy.envs.vector import BlockSizeVectorEnv


class BlockSizeSB3VecEnv(VecEnv):
    """``num_envs`` contextual-bandit episodes per step over a replay sweep (keyword arguments as
    :class:`~specpolicy.envs.vector.BlockSizeVectorEnv`: ``sweep``, ``split``, ``features``, ``reward``)."""

    def __init__(self, num_envs: int = NUM_ENVS, **kwargs: Any) -> None:
        self.env = BlockSizeVectorEnv(num_envs, **kwargs)
        super().__init__(num_envs, self.env.single_observation_space, self.env.single_action_space)
        self.candidates = self.env.candidates
        self._obs: np.ndarray | None = None
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        seed = self._seeds[0] if self._seeds and self._seeds[0] is not None else None
        self._obs, _ = self.env.reset(seed=seed)
        self._reset_seeds()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self):
        answered = self._obs
        self._obs, rewards, terminated, truncated, extra = self.env.step(self._actions)
        infos = [{"terminal_observation": answered[i], "block_size": int(extra["block_size"][i]),
                  "tau": float(extra["tau"][i])} for i in range(self.num_envs)]
        return self._obs, rewards.astype(np.float32), terminated | truncated, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.env, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None,
                   **method_kwargs: Any) -> list:
        return [getattr(self.env, method_name)(*method_args, **method_kwargs)] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        return [indices] if isinstance(indices, int) else list(indices)
