"""Other engines' DFlash depth controllers (SGLang, mistral.rs, mlx-vlm, llama.cpp's), each its engine's code
at its defaults; docs/field.md cites each source and walks each rule through."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from specpolicy.defaults import LLAMACPP_N_MAX
from specpolicy.plugins.field_rules import field_policy, push, window_sum
from specpolicy.replay.lanes import Lane, State, lanes

SGLANG_SLOTS = {1: ((1, 3, 5, 7), 0.0, -0.25), 8: ((0, 1, 3), 0.0, 0.0), 32: ((0, 1), 0.0, 0.0),
                64: ((0,), 0.0, 0.0)}
"""SGLang's ``DEFAULT_ADAPTIVE_CONFIG``: batch size -> (candidate steps, up and down hysteresis)"""


@dataclass(frozen=True)
class SglangAdaptive:
    candidate_steps: tuple = SGLANG_SLOTS[1][0]
    up_hysteresis: float = SGLANG_SLOTS[1][1]
    down_hysteresis: float = SGLANG_SLOTS[1][2]
    initial_steps: int = 3
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    verify_block: int = 0
    """0: the steps are the drafts; else every draft is this block and the steps + 1 its verify length"""
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {
        "verify_block": "--speculative-num-draft-tokens", "candidate_steps": "json:1.candidate_steps",
        "up_hysteresis": "json:1.up_hysteresis", "down_hysteresis": "json:1.down_hysteresis",
        "initial_steps": "--speculative-num-steps", "ema_alpha": "json:ema_alpha",
        "update_interval": "json:update_interval", "warmup_batches": "json:warmup_batches"}
    """the ``--speculative-adaptive-config`` JSON's keys (``json:``) and flags"""

    def config_base(self) -> dict:
        """The config file's other slots: a file replaces SGLang's defaults whole."""
        return {str(key): {"candidate_steps": list(steps), "up_hysteresis": up, "down_hysteresis": down}
                for key, (steps, up, down) in self.slots.items() if key != 1}

    @cached_property
    def slots(self) -> dict[int, tuple]:
        """Batch size -> (candidate steps, up and down hysteresis), in batch order: SGLang's slots with this
        batch-one slot (the only one where it verifies a block)."""
        return {**({} if np.max(self.verify_block) else SGLANG_SLOTS),
                1: (self.candidate_steps, self.up_hysteresis, self.down_hysteresis)}

    def _columns(self, n: int) -> tuple[np.ndarray, ...]:
        """:attr:`slots` at ``n`` lanes: candidate steps [n, K, C] (distinct and ascending, the largest
        repeated after them), how many are distinct, up and down hysteresis [n, K]."""
        slots = list(self.slots.values())
        rows = [np.broadcast_to(np.atleast_2d(steps), (n, np.shape(steps)[-1])) for steps, _, _ in slots]
        width = max(r.shape[1] for r in rows)
        steps = np.sort(np.stack([np.pad(r, ((0, 0), (0, width - r.shape[1])), "edge") for r in rows], 1))
        repeated = np.concatenate([np.zeros((n, len(rows), 1), bool), np.diff(steps, axis=-1) == 0], axis=-1)
        up, down = (np.stack([np.broadcast_to(slot[i], n) for slot in slots], axis=1) for i in (1, 2))
        steps = np.sort(np.where(repeated, steps[..., -1:], steps), axis=-1)
        return steps, (~repeated).sum(axis=-1), up, down

    def start(self, prompt_length: np.ndarray) -> State:
        steps, distinct, up, down = self._columns(len(prompt_length))
        middle = np.take_along_axis(steps, (distinct // 2)[..., None], -1)[..., 0]
        initial = np.reshape(self.initial_steps, (-1, 1))
        current = np.where((steps == initial[..., None]).any(axis=-1), initial, middle)
        return State(steps=current, ema=(current - 1).astype(float), count=current * 0, candidates=steps,
                     batch=current[:, 0] * 0 + 1, distinct=distinct, up=up, down=down)

    def _slot(self, s: State) -> tuple[np.ndarray, np.ndarray]:
        """(lanes, each lane's slot): the largest batch key <= its batch (else the smallest)."""
        keys = list(self.slots)
        return np.arange(len(s.batch)), np.maximum(np.searchsorted(keys, s.batch, side="right") - 1, 0)

    def block(self, s: State, batch: int) -> np.ndarray:
        s.batch = s.batch * 0 + batch
        return s.steps[self._slot(s)] + 1

    def choices(self) -> set[int]:
        return {self.verify_block} if self.verify_block else {
            step + 1 for candidates, _, _ in self.slots.values() for step in candidates}

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        slot = self._slot(s)
        steps, ema, count = s.steps[slot], s.ema[slot], s.count[slot] + 1
        ema = np.where(steps > 0, (1 - self.ema_alpha) * ema + self.ema_alpha * accepted, ema)
        after = count - self.warmup_batches
        due = (after > 0) & (after % self.update_interval == 0)
        if due.any():
            steps, ema = self._recompute(s, slot, due, steps, ema)
        s.steps[slot], s.ema[slot], s.count[slot] = steps, ema, count

    def _recompute(self, s: State, slot: tuple, due: np.ndarray, old: np.ndarray, ema: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Where ``due``: down past every lower step the EMA is at or under, else up past every higher one it
        exceeds; from 0, one step up. The new steps and EMA [lanes]."""
        rows, steps, last = slot[0], s.candidates[slot], s.distinct[slot] - 1
        at = np.argmax(steps == old[:, None], axis=1)
        up = np.minimum(at + 1, last)
        ema = np.where(due & (old == 0) & (steps[rows, up] > 0) & (ema < 0), steps[rows, up] - 1.0, ema)
        moving, i = due & (old != 0), at
        for _ in range(steps.shape[1]):  # down while the EMA is at or under the lower step's threshold
            lower = steps[rows, np.maximum(i - 1, 0)]
            moving = moving & (i > 0) & (ema <= np.where(lower == 0, 0.5, lower - 0.5) + s.down[slot])
            i = i - moving
        moving = due & (old != 0) & (i == at)
        for _ in range(steps.shape[1]):  # else up while it exceeds this step's
            moving = moving & (i < last) & (ema > steps[rows, i] - 0.5 + s.up[slot])
            i = i + moving
        return np.where(due, np.where(old == 0, steps[rows, up], steps[rows, i]), old), ema


@dataclass(frozen=True)
class MistralrsDflash:
    max_drafts: int = 7
    adaptive: int = 1
    full_depth_max_batch: int = 2
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {"max_drafts": "--mtp-n-predict",
                                       "adaptive": "$MISTRALRS_DFLASH_ADAPTIVE",
                                       "full_depth_max_batch": "ADAPT_FULL_DEPTH_MAX_BATCH"}

    def start(self, prompt_length: np.ndarray) -> State:
        return State(zero=lanes(prompt_length, 0))

    def block(self, s: State, batch: int) -> np.ndarray:
        full = (self.adaptive == 0) | (self.max_drafts == 0) | (batch <= self.full_depth_max_batch)
        return np.where(full, self.max_drafts, np.minimum(1, self.max_drafts)) + 1 + s.zero

    def choices(self) -> set[int]:
        return {self.max_drafts + 1, min(1, self.max_drafts) + 1 if self.adaptive else self.max_drafts + 1}

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        """Stateless: the depth follows the batch."""


@dataclass(frozen=True)
class MistralrsAdaptive:
    max_drafts: int = 7
    tiers: tuple = (3, 5)
    ema_alpha: float = 0.2
    tier_frac: float = 0.65
    hysteresis: float = 0.25
    up_margin: float = 0.5
    sticky: int = 4
    warmup: int = 8
    cooldown: int = 32
    max_batch: int = 2
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {
        "max_drafts": "DFLASH_DEFAULT_MAX_DRAFTS", "tiers": "ADAPT_MIN_TIER, ADAPT_MID_TIER",
        "ema_alpha": "ADAPT_EMA_ALPHA", "tier_frac": "ADAPT_TIER_FRAC", "hysteresis": "ADAPT_HYSTERESIS",
        "up_margin": "ADAPT_UP_MARGIN", "sticky": "ADAPT_STICKY", "warmup": "ADAPT_WARMUP",
        "cooldown": "ADAPT_COOLDOWN", "max_batch": "ADAPT_MAX_BATCH"}

    def start(self, prompt_length: np.ndarray) -> State:
        zero, deepest = lanes(prompt_length, 0), lanes(prompt_length, self.max_drafts)
        return State(ema=zero * 0.0, current=deepest, pending=deepest, streak=zero, seen=zero, cooldown=zero,
                     batch=zero + 1)

    def block(self, s: State, batch: int) -> np.ndarray:
        s.batch = s.seen * 0 + batch
        return np.where(batch <= self.max_batch, s.current, self.max_drafts) + 1

    def choices(self) -> set[int]:
        return {d + 1 for d in self.tiers if d <= self.max_drafts} | {self.max_drafts + 1}

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        served = s.batch <= self.max_batch  # else the full depth, a streak forgotten
        s.cooldown = np.where(~served & (s.current != self.max_drafts), self.cooldown, s.cooldown)
        s.current, s.streak = np.where(served, s.current, self.max_drafts), np.where(served, s.streak, 0)
        s.seen = s.seen + served
        average = self.ema_alpha * accepted + (1 - self.ema_alpha) * s.ema
        s.ema = np.where(served, np.where(s.seen == 1, accepted, average), s.ema)
        cooling = served & (s.seen >= self.warmup) & (s.cooldown > 0)
        s.cooldown = s.cooldown - cooling
        deciding = served & (s.seen >= self.warmup) & ~cooling
        depths = np.concatenate([np.atleast_2d(self.tiers), np.reshape(self.max_drafts, (-1, 1))], axis=1)
        depths = np.where(depths <= np.reshape(self.max_drafts, (-1, 1)), depths, -1)  # -1: none
        up = np.where(depths > s.current[:, None], depths, np.iinfo(np.int64).max).min(axis=1)
        down = np.where(depths < s.current[:, None], depths, -1).max(axis=1)
        desired = np.where((up <= self.max_drafts) & (s.ema >= s.current - self.up_margin), up, np.where(
            (down >= 0) & (s.ema < s.current * self.tier_frac - self.hysteresis), down, s.current))
        moving = deciding & (desired != s.current)
        agreed = s.pending == desired
        s.streak = np.where(moving, np.where(agreed, s.streak + 1, 1), np.where(deciding, 0, s.streak))
        s.pending = np.where(moving & ~agreed, desired, s.pending)
        switch = moving & (s.streak >= self.sticky)
        s.current, s.streak = np.where(switch, desired, s.current), np.where(switch, 0, s.streak)
        s.cooldown = np.where(switch, self.cooldown, s.cooldown)


@dataclass(frozen=True)
class MlxVlm:
    block_size: int = 16
    first_block: int = 0
    window: int = 8
    min_block_size: int = 4
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {"block_size": "--draft-block-size",
                                       "first_block": "dflash_initial_block_size (0: none)",
                                       "window": "# the recent rounds read", "min_block_size": "# min_total"}

    def start(self, prompt_length: np.ndarray) -> State:
        zero, width = lanes(prompt_length, 0), int(np.max(self.window))
        empty = np.zeros((len(zero), width), np.int64)
        return State(accepted=empty, drafted=empty, rounds=zero)

    @property
    def first(self) -> np.ndarray:
        """The first round's block: ``first_block`` (at least 2, at most the block), else the block."""
        return np.where(self.first_block != 0, np.minimum(self.block_size, np.maximum(2, self.first_block)),
                        self.block_size)

    def choices(self) -> set[int]:
        """Its floor up to its block, and a first block below it (held while acceptance is middling)."""
        return set(range(min(self.block_size, self.min_block_size, int(self.first)), self.block_size + 1))

    def block(self, s: State, batch: int) -> np.ndarray:
        """Over the recent rounds: halve (or -2) after weak ones, -2 after middling, +2 after strong ones."""
        top, low, rounds = self.block_size, np.minimum(self.block_size, self.min_block_size), s.rounds
        current = np.minimum(top, np.maximum(2, s.drafted[:, -1] + 1))
        accepted, drafted = window_sum(s.accepted, rounds), np.maximum(window_sum(s.drafted, rounds), 1)
        rate, mean = accepted / drafted, accepted / np.maximum(rounds, 1)
        full = window_sum(s.accepted >= s.drafted, rounds) / np.maximum(rounds, 1)
        weak = np.maximum(low, np.minimum(top, np.where(current >= 8, current // 2, current - 2)))
        strong = np.minimum(top, np.where((rate >= 0.85) & (full >= 0.75), current + 2, current))
        moved = np.where((rate < 0.30) | (mean < 2.0), weak,
                         np.where(rate < 0.50, np.maximum(low, np.minimum(top, current - 2)), strong))
        return np.where(rounds == 0, self.first, moved)

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        drafted = length > 1
        s.accepted, _ = push(s.accepted, s.rounds, accepted, drafted, self.window)
        s.drafted, s.rounds = push(s.drafted, s.rounds, length - 1, drafted, self.window)


@dataclass(frozen=True)
class LlamacppStreak:
    threshold: int = 11
    bias: int = 0
    n_min: int = 0
    n_max: int = LLAMACPP_N_MAX
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {
        "threshold": "--spec-draft-adaptive-length-threshold", "bias": "--spec-draft-adaptive-length-bias",
        "n_min": "--spec-draft-n-min", "n_max": "--spec-draft-n-max"}

    def start(self, prompt_length: np.ndarray) -> State:
        return State(n=lanes(prompt_length, self.n_max), run=lanes(prompt_length, 0))

    def block(self, s: State, batch: int) -> np.ndarray:
        return s.n + 1

    def choices(self) -> set[int]:
        return set(range(self.n_min + 1, self.n_max + 2))

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        success = accepted >= length - 1 - self.bias
        run = np.where(success, np.maximum(1, s.run + 1), np.minimum(-1, s.run - 1))  # > 0: successes
        moved = (self.threshold != 0) & (np.abs(run) >= self.threshold)
        step = np.minimum(self.n_max, np.maximum(self.n_min, s.n + np.where(success, 1, -1)))
        s.n = np.where(moved, step, s.n)
        s.run = np.where(moved, 0, run)


@dataclass(frozen=True)
class LlamacppEma:
    alpha: float = 0.25
    probe: float = 1.0
    initial: float = 2.0
    n_min: int = 1
    n_max: int = LLAMACPP_N_MAX
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {"n_min": "--spec-draft-n-min", "n_max": "--spec-draft-n-max",
                                       "alpha": "# alpha", "probe": "# probe", "initial": "# initial EMA"}
    """with ``--spec-draft-adaptive``; alpha, probe and init are constants of the fork's source"""

    def start(self, prompt_length: np.ndarray) -> State:
        return State(ema=lanes(prompt_length, self.initial, float))

    def block(self, s: State, batch: int) -> np.ndarray:
        return np.minimum(self.n_max, np.maximum(self.n_min, np.floor(s.ema + 0.5))).astype(np.int64) + 1

    choices = LlamacppStreak.choices

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        average = (1 - self.alpha) * s.ema + self.alpha * accepted
        probed = np.where(accepted >= length - 1, s.ema + self.probe, average)
        s.ema = np.where(length > 1, probed, s.ema)


@dataclass(frozen=True)
class SglangDflashVerify(SglangAdaptive):  # sglang #24596: the same EMA over verify lengths 4/8/12/16
    candidate_steps: tuple = (3, 7, 11, 15)
    initial_steps: int = 15
    verify_block: int = 16
    TERMS: ClassVar[dict[str, str]] = {**SglangAdaptive.TERMS, "initial_steps": "# the whole block first"}


sglang_adaptive_policy = field_policy("sglang-adaptive", SglangAdaptive)
sglang_dflash_verify_policy = field_policy("sglang-dflash-verify", SglangDflashVerify)
mistralrs_dflash_policy = field_policy("mistralrs-dflash", MistralrsDflash)
mistralrs_adaptive_policy = field_policy("mistralrs-adaptive", MistralrsAdaptive)
mlx_vlm_policy = field_policy("mlx-vlm", MlxVlm)
llamacpp_streak_policy = field_policy("llamacpp-streak", LlamacppStreak)
llamacpp_ema_policy = field_policy("llamacpp-ema", LlamacppEma)
