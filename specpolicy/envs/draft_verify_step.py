"""``specpolicy/DraftVerifyStep-v0``: each cycle in two steps, B, then L after the block's confidences
(actions index ``candidates``, ``action_masks()`` marks L <= B); observation float32 [22 + 2 (Bmax - 1)]."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from specpolicy.cycles import CycleRecord
from specpolicy.envs.block_size_step import OBSERVATION_SIZE, BlockSizeStepEnv, step_observation
from specpolicy.envs.replay_data import OBSERVATION_BOUND
from specpolicy.state import DecodeState, DraftedBlock, mean_acceptance

DRAFT, VERIFY = 0, 1


def draft_verify_observation(state: DecodeState, candidates: tuple[int, ...], budget: int,
                             prefill: np.ndarray, block: DraftedBlock | None = None) -> np.ndarray:
    """The observation [22 + 2 (Bmax - 1)] before B (``block`` None) or L (the drafted ``block``)."""
    top = max(candidates)
    confidences, running, head = np.zeros(top - 1, np.float32), np.zeros(top - 1, np.float32), [DRAFT, 0.0]
    if block is not None:
        values = np.asarray(block.confidences, np.float32)
        confidences[: len(values)], running[: len(values)] = values, np.cumprod(values)
        head = [VERIFY, block.block_size / top]
    base = step_observation(state, candidates, budget, prefill)
    observation = np.concatenate([base, np.asarray(head, np.float32), confidences, running])
    return np.clip(observation, -OBSERVATION_BOUND, OBSERVATION_BOUND).astype(np.float32)


class DraftVerifyStepEnv(BlockSizeStepEnv):
    """Per-cycle (B, L) control, arguments as :class:`~specpolicy.envs.block_size_step.BlockSizeStepEnv`; a
    replay sweep must hold verify lengths and confidences (``sweep --verify-lengths --confidences``)."""

    granularity = "draft_verify"

    def __init__(self, sweep=None, reward: str = "tokens", render_mode: str | None = None,
                 backend: str = "replay", live: dict | None = None, split: str | None = None) -> None:
        super().__init__(sweep, reward, render_mode, backend, live, split)
        if self.source.kind == "replay":
            self._check_sweep()
        size = OBSERVATION_SIZE + 2 + 2 * (max(self.candidates) - 1)
        self.observation_space = spaces.Box(-OBSERVATION_BOUND, OBSERVATION_BOUND, (size,), np.float32)
        self.block: DraftedBlock | None = None

    def _check_sweep(self) -> None:
        drafted = sorted(b for b in self.candidates if b > 1)
        recorded = all(set(drafted) <= set(t.confidences) for t in self.source.tables)
        if self.source.store.meta.get("verify_lengths") and recorded:
            return
        raise ValueError("DraftVerifyStep-v0 needs a sweep with verify lengths and the drafter's "
                         "confidences of every block size: specpolicy sweep --verify-lengths --confidences "
                         f"{','.join(map(str, drafted))} --out DIR, then sweep=DIR")

    def _observation(self) -> np.ndarray:
        return draft_verify_observation(self.session.state, self.candidates, self._budget, self._prefill,
                                        self.block)

    def action_masks(self) -> np.ndarray:
        """bool [C]: every block size when drafting; the lengths up to the drafted B when verifying."""
        if self.block is None:
            return np.ones(len(self.candidates), dtype=bool)
        return np.asarray([b <= self.block.block_size for b in self.candidates])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.block = None
        observation, info = super().reset(seed=seed, options=options)
        return observation, {**info, "action_mask": self.action_masks()}

    def step(self, action):
        choice = self._choice(action)
        if self.block is None and choice > 1:
            self.block = self.session.draft(choice)
            if self.block.block_size:
                info = {"phase": "draft", "block_size": self.block.block_size, "prompt_id": self._prompt_id,
                        "action_mask": self.action_masks()}
                return self._observation(), self._draft_reward(self.block.block_size), False, False, info
        if self.block is None:
            cycle = self.session.step(choice)  # B = 1: the whole cycle is its draft step
            reward = self._reward(cycle)
        else:
            cycle = self.session.verify(choice)
            reward = self._reward(cycle) - self._draft_reward(cycle.block_size)
        self.block = None
        return self._observation(), reward, self.session.done, False, self._cycle_info(cycle)

    def _draft_reward(self, block_size: int) -> float:
        """The draft step's share of the cycle's reward (less its modelled cost in AR steps)."""
        if self.reward not in ("seconds", "saved"):
            return 0.0
        return -self.source.latency.draft_seconds.get(block_size, 0.0) / self.source.latency.ar_seconds

    def _cycle_info(self, cycle: CycleRecord) -> dict[str, Any]:
        info = {"phase": "verify", "block_size": cycle.block_size, "verify_length": cycle.verify_length,
                "accepted": cycle.accepted, "committed": cycle.committed, "prompt_id": self._prompt_id,
                "action_mask": self.action_masks()}
        if self.session.done:
            info["tau"] = mean_acceptance(self.session.cycles)
        return info
