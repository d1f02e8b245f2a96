"""``specpolicy/BlockSizeStep-v0``: a step per decoding cycle, the action its block size, on replay or live
(observation float32 [20]; reward ``seconds``, ``tokens``, ``time`` or ``saved``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from specpolicy.cycles import CycleRecord
from specpolicy.envs.replay_data import OBSERVATION_BOUND
from specpolicy.envs.rewards import check_reward
from specpolicy.envs.sources import open_source
from specpolicy.state import DecodeState, mean_acceptance

OBSERVATION_SIZE = 20


def step_observation(state: DecodeState, candidates: tuple[int, ...], budget: int,
                     prefill: np.ndarray) -> np.ndarray:
    """The step environment's observation [20] of a decode ``state`` (what a trained agent reads live)."""
    top = max(candidates)
    accepted, sizes = state.accepted_history, state.block_size_history
    history = ([0] * 3 + accepted)[-3:]
    values = [state.generated / budget, len(accepted) / 64, *(a / top for a in history),
              (sizes[-1] if sizes else 0) / top, float(np.mean(accepted)) / top if accepted else 0.0]
    return np.clip(np.concatenate([np.asarray(values, np.float32), prefill]),
                   -OBSERVATION_BOUND, OBSERVATION_BOUND).astype(np.float32)


class BlockSizeStepEnv(gym.Env):
    """Per-cycle block-size control; ``session``: the episode's decode (its ``state``: what is observed)."""

    metadata: ClassVar[dict] = {"render_modes": []}
    granularity = "cycle"

    def __init__(self, sweep: str | Path | None = None, reward: str = "tokens",
                 render_mode: str | None = None,
                 backend: str = "replay", live: dict | None = None, split: str | None = None) -> None:
        if render_mode is not None:
            # a TypeError, as for an unsupported argument: stable-baselines3's make_vec_env then retries
            # without it
            raise TypeError("BlockSizeStep-v0 has no render modes; pass render_mode=None")
        check_reward(reward, self.granularity, backend)
        self.reward = reward
        self.session = None
        self.observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (OBSERVATION_SIZE,),
                                            np.float32)
        self.source = open_source(backend, sweep, split, live, features="compact")
        if self.source.kind == "replay" and any(t is None for t in self.source.tables):
            raise ValueError("BlockSizeStep-v0 needs a replay sweep (specpolicy sweep --mode replay)")
        if reward != "tokens" and self.source.latency is None:
            raise ValueError(f"reward={reward!r} needs the sweep's cost table (latency.json)")
        self.candidates = self.source.candidates
        self.action_space = spaces.Discrete(len(self.candidates))

    def _observation(self) -> np.ndarray:
        return step_observation(self.session.state, self.candidates, self._budget, self._prefill)

    def _start(self, options: dict[str, Any] | None) -> bool:
        """Begin one prompt's decode; True where prefill alone finished a randomly drawn prompt."""
        index = (options or {}).get("prompt_index")
        episode = self.source.episode(self.np_random, index)
        self.session, self._prompt_id = episode.session, episode.prompt_id
        self._budget, self._prefill = episode.budget, episode.observation  # compact prefill features
        return self.session.done and index is None

    def close(self) -> None:
        self.session = None
        super().close()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        while self._start(options):
            pass  # prompts finished by prefill alone have no cycle to control
        return self._observation(), {"prompt_id": self._prompt_id}

    def _reward(self, cycle: CycleRecord) -> float:
        if self.reward == "tokens":
            return float(cycle.committed)
        latency = self.source.latency
        if self.reward == "time":
            return cycle.committed / latency.cycles_seconds([cycle])
        steps = latency.cycles_seconds([cycle]) / latency.ar_seconds
        if self.reward == "seconds":
            return -steps
        return cycle.committed - steps

    def _choice(self, action) -> int:
        """The candidate ``action`` indexes, once the episode is running and the action is valid."""
        if self.session is None or self.session.done:
            raise RuntimeError("call reset() before step(); the episode has ended")
        if not self.action_space.contains(np.int64(action) if np.isscalar(action) else action):
            raise ValueError(f"invalid action {action!r}: expected an integer in [0, {len(self.candidates)})")
        return self.candidates[int(action)]

    def step(self, action):
        size = self._choice(action)
        cycle = self.session.step(size)
        done = self.session.done
        info = {"block_size": size, "verify_length": cycle.verify_length, "accepted": cycle.accepted,
                "committed": cycle.committed, "prompt_id": self._prompt_id}
        if done:
            info["tau"] = mean_acceptance(self.session.cycles)
        return self._observation(), self._reward(cycle), done, False, info
