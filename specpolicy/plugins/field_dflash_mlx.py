"""dflash-mlx's adaptive block (``--verify-mode adaptive``; docs/field.md walks both) as array controllers:
``dflash-mlx`` (``_AdaptiveBlockPolicy``, probes that return only where measurably faster; time is the cost
table's) and ``dflash-mlx-count``, the same policy before its speed gate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specpolicy.plugins.field_rules import field_policy, push, window_sum
from specpolicy.replay.lanes import Lane, State, lanes

FULL, REDUCED, PROBE = 0, 1, 2
"""the modes, as a lane's state holds them"""
RECENT = 32
"""the reduced cycles whose commits and seconds a probe is measured against"""


def _zero(where: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each of ``values`` [lanes] set to 0 at lanes ``where`` (a count restarted, a window emptied)."""
    return tuple(np.where(where, 0, v) for v in values)


def _stats(total: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accepted drafts / committed tokens, committed tokens per cycle) of windows of ``total`` commits."""
    some = total > 0
    return (np.where(some, (total - count) / np.where(some, total, 1), 0.0),
            np.where(some, total / np.maximum(count, 1), 0.0))


def _start(rule: DflashMlx | DflashMlxCount, prompt_length: np.ndarray, **more: np.ndarray) -> State:
    """A request's state at every lane: reduced on a long prompt, else the full block."""
    long = prompt_length >= rule.long_context_prompt_tokens
    zero = lanes(prompt_length, 0)
    burst = np.where(long, rule.long_context_burst_cycles, rule.reduced_burst_cycles) + zero
    full = np.zeros((len(zero), int(np.max(rule.window_size))), np.int64)
    return State(mode=np.where(long, REDUCED, FULL) + zero, since_probe=zero, probe_left=zero, probe=zero,
                 probes=zero, burst=burst, full=full, fulls=zero, **more)


def _block(rule: DflashMlx | DflashMlxCount, s: State, batch: int) -> np.ndarray:
    reduced = np.minimum(rule.block_tokens, rule.min_block_tokens)
    return np.where(s.mode == REDUCED, reduced, rule.block_tokens)


def _choices(rule: DflashMlx | DflashMlxCount) -> set[int]:
    return {rule.block_tokens, min(rule.block_tokens, rule.min_block_tokens)}


@dataclass(frozen=True)
class DflashMlx:
    block_tokens: int = 16
    min_block_tokens: int = 4
    window_size: int = 4
    reduced_burst_cycles: int = 64
    long_context_prompt_tokens: int = 32768
    long_context_burst_cycles: int = 64
    probe_cycles: int = 8
    early_probe_cycles: int = 4
    early_probe_min_cycles: int = 16
    early_probe_window: int = 8
    early_probe_full_acceptance: float = 0.75
    drop_acceptance_threshold: float = 0.75
    resume_acceptance_threshold: float = 0.80
    tpc_threshold: float = 3.5
    resume_speed_ratio: float = 1.0
    reads_time, LANES = True, True
    TERMS: ClassVar[dict[str, str]] = {"block_tokens": "full_block_tokens"}
    """fields under another name in the engine (the rest keep theirs): ``_AdaptiveBlockPolicy``'s fields"""

    def start(self, prompt_length: np.ndarray) -> State:
        zero, width = lanes(prompt_length, 0), int(np.max(np.maximum(1, self.early_probe_window)))
        n = len(zero)
        return _start(self, prompt_length, lockout=zero.astype(bool), probe_cost=zero * 0.0,
                      recent=np.zeros((n, RECENT), np.int64), recent_cost=np.zeros((n, RECENT)), recents=zero,
                      accepts=np.zeros((n, width), np.int64), acceptses=zero)

    block, choices = _block, _choices

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        commit, short = 1 + accepted, length < self.block_tokens
        reduced = (s.mode == REDUCED) & short  # counted, and read by the probe and the early gate
        s.since_probe = s.since_probe + reduced
        s.recent, _ = push(s.recent, s.recents, commit, reduced, RECENT)
        s.recent_cost, s.recents = push(s.recent_cost, s.recents, seconds, reduced, RECENT)
        window = np.maximum(1, self.early_probe_window)
        whole_accept = (length > 1) & (accepted >= length - 1)
        s.accepts, s.acceptses = push(s.accepts, s.acceptses, whole_accept, reduced, window)
        full_share = window_sum(s.accepts, s.acceptses) / np.maximum(s.acceptses, 1)
        early = reduced & (self.early_probe_min_cycles > 0) & ~s.lockout & (
            s.since_probe >= self.early_probe_min_cycles) & (s.acceptses >= window) & (
            full_share >= self.early_probe_full_acceptance)
        self._probe(s, early, early | (reduced & (s.since_probe >= s.burst)))
        whole = ~short
        s.full, s.fulls = push(s.full, s.fulls, commit, whole, self.window_size)
        probing = whole & (s.mode == PROBE)
        s.probe, s.probes = s.probe + np.where(probing, commit, 0), s.probes + probing
        s.probe_cost = np.where(probing, s.probe_cost + seconds, s.probe_cost)
        s.probe_left = s.probe_left - probing
        ended = probing & (s.probe_left <= 0)
        if ended.any():
            self._judge(s, ended)
        acceptance, per_cycle = _stats(window_sum(s.full, s.fulls), s.fulls)
        weak = whole & ~probing & (s.fulls >= self.window_size) & (
            (acceptance < self.drop_acceptance_threshold) | (per_cycle < self.tpc_threshold))
        self._reduce(s, weak, False)

    def _judge(self, s: State, ended: np.ndarray) -> None:
        """A probe's last cycle: back to the full block where it accepted well and ran as fast as reduced."""
        recent_cost = np.zeros(len(ended))
        recent_cost[ended] = window_sum(s.recent_cost[ended], s.recents[ended])
        recent = window_sum(s.recent, s.recents)
        acceptance, per_cycle = _stats(s.probe, s.probes)
        reduced_speed = np.where(recent_cost > 0, recent / np.where(recent_cost > 0, recent_cost, 1), 0.0)
        probe_speed = np.where(s.probe_cost > 0, s.probe / np.where(s.probe_cost > 0, s.probe_cost, 1), 0.0)
        fast = (self.resume_speed_ratio <= 0) | (reduced_speed <= 0) | (
            probe_speed >= reduced_speed * self.resume_speed_ratio)
        back = ended & fast & (acceptance >= self.resume_acceptance_threshold) & (
            per_cycle >= self.tpc_threshold)
        s.mode, s.burst = np.where(back, FULL, s.mode), np.where(back, self.reduced_burst_cycles, s.burst)
        s.since_probe, s.probe_left, s.probe, s.probes, s.probe_cost, s.acceptses, s.fulls = _zero(
            back, s.since_probe, s.probe_left, s.probe, s.probes, s.probe_cost, s.acceptses, s.fulls)
        self._reduce(s, ended & ~back, True)

    def _reduce(self, s: State, where: np.ndarray, lockout: bool) -> None:
        s.mode, s.lockout = np.where(where, REDUCED, s.mode), np.where(where, lockout, s.lockout)
        s.burst = np.where(where, self.reduced_burst_cycles, s.burst)
        (s.since_probe, s.probe_left, s.probe, s.probes, s.probe_cost, s.recents, s.acceptses,
         s.fulls) = _zero(where, s.since_probe, s.probe_left, s.probe, s.probes, s.probe_cost, s.recents,
                          s.acceptses, s.fulls)

    def _probe(self, s: State, early: np.ndarray, where: np.ndarray) -> None:
        s.mode, s.lockout = np.where(where, PROBE, s.mode), np.where(where, s.lockout & early, s.lockout)
        left = np.maximum(1, np.where(early, self.early_probe_cycles, self.probe_cycles))
        s.probe_left = np.where(where, left, s.probe_left)
        s.burst = np.where(where, self.reduced_burst_cycles, s.burst)
        s.probe, s.probes, s.probe_cost, s.acceptses = _zero(where, s.probe, s.probes, s.probe_cost,
                                                             s.acceptses)


@dataclass(frozen=True)
class DflashMlxCount:
    block_tokens: int = 16
    min_block_tokens: int = 4
    window_size: int = 4
    reduced_burst_cycles: int = 24
    long_context_prompt_tokens: int = 32768
    long_context_burst_cycles: int = 64
    low_commit_threshold: float = 3.0
    recent_low_commit_threshold: float = 2.75
    high_commit_guard: int = 5
    probe_cycles: int = 2
    resume_commits: float = 4.25
    reads_time, LANES = False, True
    TERMS: ClassVar[dict[str, str]] = {"block_tokens": "full_block_tokens",
                                       "probe_cycles": "# probe_cycles_remaining on entering a probe",
                                       "resume_commits": "# the probe average that resumes"}

    def start(self, prompt_length: np.ndarray) -> State:
        return _start(self, prompt_length, cooldown=lanes(prompt_length, 0))

    block, choices = _block, _choices

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        commit, short = 1 + accepted, length < self.block_tokens
        reduced = (s.mode == REDUCED) & short
        s.since_probe = s.since_probe + reduced
        probe = reduced & (s.since_probe >= s.burst)
        s.mode, s.burst = np.where(probe, PROBE, s.mode), np.where(probe, self.reduced_burst_cycles, s.burst)
        s.probe_left = np.where(probe, self.probe_cycles, s.probe_left)
        s.probe, s.probes = _zero(probe, s.probe, s.probes)
        whole = ~short
        s.full, s.fulls = push(s.full, s.fulls, commit, whole, self.window_size)
        probing = whole & (s.mode == PROBE)
        s.probe, s.probes = s.probe + np.where(probing, commit, 0), s.probes + probing
        s.probe_left = np.where(probing, np.maximum(0, s.probe_left - 1), s.probe_left)
        resume = probing & ((commit > self.min_block_tokens) | (
            s.probe / np.maximum(s.probes, 1) >= self.resume_commits))
        back = probing & ~resume & (s.probe_left <= 0)
        cooling = whole & ~probing & (s.cooldown > 0)
        average = window_sum(s.full, s.fulls) / np.maximum(s.fulls, 1)
        width = s.full.shape[1]
        most = np.where(np.arange(width) >= width - s.fulls[:, None], s.full, 0).max(axis=1)
        weak = whole & ~probing & ~cooling & (s.fulls >= self.window_size) & (
            average <= self.low_commit_threshold) & (average <= self.recent_low_commit_threshold) & (
            most <= self.high_commit_guard)
        s.mode = np.where(resume, FULL, np.where(back | weak, REDUCED, s.mode))
        s.cooldown = np.where(resume, self.window_size, s.cooldown - cooling)
        s.since_probe, = _zero(resume | back | weak, s.since_probe)
        s.probe, s.probes = _zero(resume | back, s.probe, s.probes)
        s.probe_left, = _zero(resume, s.probe_left)
        s.burst = np.where(probing | weak, self.reduced_burst_cycles, s.burst)


dflash_mlx_policy = field_policy("dflash-mlx", DflashMlx)
dflash_mlx_count_policy = field_policy("dflash-mlx-count", DflashMlxCount)
