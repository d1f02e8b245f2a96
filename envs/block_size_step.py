"""``specpolicy/BlockSizeStep-v0``: one step per decoding cycle, the action picks that cycle's block size.

Replay backend: exact, from the counterfactual tables of a replay sweep; live backend
(``backend="live"``): the decoder runs the prompt and waits for each action. Observation (float32 [20]):
share of the token budget used, cycle count / 64, the last three accepted lengths and the last
block size (each / largest candidate), the mean accepted length so far, and the 13 compact
prefill features of the prompt. Drafter confidences are not part of the replay tables, so the
observation leaves them out. Reward: minus the cycle's modelled seconds in AR steps
(``reward="seconds"``: the episode's tokens are fixed, so the undiscounted return ranks policies by
decode time), tokens committed that cycle (``reward="tokens"``: every policy's undiscounted return is
the same, the tokens of the output) or tokens per modelled second of that cycle (``reward="time"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from specpolicy.envs.replay_data import OBSERVATION_BOUND, ReplayData
from specpolicy.features import compact

STEP_REWARDS = ("tokens", "time", "seconds")
OBSERVATION_SIZE = 20


class BlockSizeStepEnv(gym.Env):
    """Per-cycle block-size control on exact replay."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, sweep: str | Path | None = None, reward: str = "tokens", render_mode: str | None = None,
                 backend: str = "replay", live: dict | None = None, split: str = "train") -> None:
        if render_mode is not None:
            # a TypeError, as for an unsupported argument: stable-baselines3's make_vec_env then retries without it
            raise TypeError("BlockSizeStep-v0 has no render modes; pass render_mode=None")
        if reward not in STEP_REWARDS:
            raise ValueError(f"unknown reward {reward!r}; use one of {', '.join(STEP_REWARDS)}")
        if backend not in ("replay", "live"):
            raise ValueError(f"unknown backend {backend!r}; use replay or live")
        self.backend = backend
        self.observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (OBSERVATION_SIZE,), np.float32)
        if backend == "live":
            if reward != "tokens":
                raise ValueError("the live backend rewards tokens committed per cycle (reward='tokens')")
            from specpolicy.envs.live_step import LiveStepBackend

            self.reward = reward
            self.live = LiveStepBackend(**(live or {}))
            self.candidates = self.live.candidates
            self.action_space = spaces.Discrete(len(self.candidates))
            return
        self.data = ReplayData.load(sweep, "compact", split=split)
        if any(t is None for t in self.data.tables):
            raise ValueError("BlockSizeStep-v0 needs a replay sweep (specpolicy sweep --mode replay)")
        if reward in ("time", "seconds") and self.data.latency is None:
            raise ValueError(f"reward={reward!r} needs the sweep's cost table (latency.json)")
        self.reward = reward
        self.candidates = self.data.candidates
        self.prefill = self.data.observations  # compact prefill features, loaded once with the tables
        self.action_space = spaces.Discrete(len(self.candidates))
        self._table = None
        self._done = True

    def _observation(self, budget: int | None = None, prefill: np.ndarray | None = None) -> np.ndarray:
        top = max(self.candidates)
        history = ([0] * 3 + self._accepted)[-3:]
        budget = budget if budget is not None else self._table.budget
        prefill = prefill if prefill is not None else self.prefill[self._index]
        values = [self._produced / budget, len(self._accepted) / 64,
                  *(a / top for a in history), (self._sizes[-1] if self._sizes else 0) / top,
                  float(np.mean(self._accepted)) / top if self._accepted else 0.0]
        return np.clip(np.concatenate([np.asarray(values, np.float32), prefill]),
                       -OBSERVATION_BOUND, OBSERVATION_BOUND).astype(np.float32)

    # --- live backend -----------------------------------------------------------------------------------

    def _live_observation(self, state) -> np.ndarray:
        self._produced = state.generated
        self._accepted, self._sizes = list(state.accepted_history), list(state.block_size_history)
        return self._observation(self.live.budget, self._live_prefill)

    def _reset_live(self):
        while True:
            kind, payload, prompt_id = self.live.reset(self.np_random)
            if kind == "state":
                break  # prompts finished by prefill alone have no cycle to control
        self._prompt_id, self._done = prompt_id, False
        self._live_prefill = compact(payload.prefill_logits.detach().float().cpu().numpy()[None],
                                     np.array([payload.prompt_length]))[0]
        self._last_generated = payload.generated
        return self._live_observation(payload), {"prompt_id": prompt_id}

    def _step_live(self, size: int):
        kind, payload = self.live.step(size)
        if kind == "state":
            reward = payload.generated - self._last_generated
            self._last_generated = payload.generated
            info = {"block_size": size, "accepted": payload.accepted_history[-1], "committed": reward,
                    "prompt_id": self._prompt_id}
            return self._live_observation(payload), float(reward), False, False, info
        trace = payload
        last = trace.cycles[-1]
        self._done = True
        self._accepted, self._sizes = [c.accepted for c in trace.cycles], [c.block_size for c in trace.cycles]
        self._produced = len(trace.output_ids)
        info = {"block_size": size, "accepted": last.accepted, "committed": last.committed,
                "prompt_id": self._prompt_id, "tau": trace.tau}
        return self._observation(self.live.budget, self._live_prefill), float(last.committed), True, False, info

    def close(self) -> None:
        if self.backend == "live":
            self.live.close()
        super().close()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.backend == "live":
            return self._reset_live()
        while True:
            if options and "prompt_index" in options:
                self._index = int(options["prompt_index"])
            else:
                self._index = int(self.np_random.integers(len(self.data.tables)))
            self._table = self.data.tables[self._index]
            self._position, self._produced, done = self._table.start()
            if not done or (options and "prompt_index" in options):
                break  # prompts finished by prefill alone have no cycle to control
        self._accepted, self._sizes = [], []
        self._done = done
        return self._observation(), {"prompt_id": self.data.prompt_ids[self._index]}

    def step(self, action):
        if (self.backend == "replay" and self._table is None) or getattr(self, "_done", True):
            raise RuntimeError("call reset() before step(); the episode has ended")
        if not self.action_space.contains(np.int64(action) if np.isscalar(action) else action):
            raise ValueError(f"invalid action {action!r}: expected an integer in [0, {len(self.candidates)})")
        size = self.candidates[int(action)]
        if self.backend == "live":
            return self._step_live(size)
        cycle, self._position, self._produced, self._done = self._table.cycle(self._position, self._produced, size)
        self._accepted.append(cycle.accepted)
        self._sizes.append(size)
        reward = float(cycle.committed)
        if self.reward == "time":
            reward /= self.data.latency.cycle_seconds(size)
        elif self.reward == "seconds":
            reward = -self.data.latency.in_ar_steps(size)
        info = {"block_size": size, "accepted": cycle.accepted, "committed": cycle.committed,
                "prompt_id": self.data.prompt_ids[self._index]}
        if self._done:
            info["tau"] = float(np.mean(self._accepted) + 1)
        return self._observation(), reward, bool(self._done), False, info
