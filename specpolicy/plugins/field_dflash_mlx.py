"""dflash-mlx's adaptive block (``--verify-mode adaptive``) as field controllers (docs/field.md walks both):
``dflash-mlx``, ``_AdaptiveBlockPolicy`` (``dflash_mlx/engine/spec_epoch.py`` @0e8455d: full and reduced
blocks, probes that return only where measurably faster; time is the cost table's), and ``dflash-mlx-count``,
the same policy before its speed gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from specpolicy.plugins.field_rules import ControllerState as State
from specpolicy.plugins.field_rules import field_policy


def _window_stats(commits: Sequence[int]) -> tuple[float, float]:
    """(accepted drafts / committed tokens, committed tokens per cycle) of a window of cycles."""
    total = sum(commits)
    return ((total - len(commits)) / total, total / len(commits)) if total else (0.0, 0.0)


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
    reads_time = True
    TERMS: ClassVar[dict[str, str]] = {"block_tokens": "full_block_tokens"}
    """fields under another name in the engine (the rest keep theirs): ``_AdaptiveBlockPolicy``'s fields"""

    def start(self, prompt_length: int) -> State:
        long = prompt_length >= self.long_context_prompt_tokens
        return State(mode="reduced" if long else "full", since_probe=0, probe_left=0, lockout=False,
                      burst=self.long_context_burst_cycles if long else self.reduced_burst_cycles,
                      full=[], probe=[], probe_cost=[], reduced=[], reduced_cost=[], full_accepts=[])

    def block(self, s: State, batch: int) -> int:
        return min(self.block_tokens, self.min_block_tokens) if s.mode == "reduced" else self.block_tokens

    def choices(self) -> set[int]:
        return {self.block_tokens, min(self.block_tokens, self.min_block_tokens)}

    def _reduce(self, s: State, lockout: bool = False) -> None:
        s.mode, s.since_probe, s.burst, s.probe_left = "reduced", 0, self.reduced_burst_cycles, 0
        s.lockout = lockout
        s.probe, s.probe_cost, s.reduced, s.reduced_cost, s.full_accepts, s.full = [], [], [], [], [], []

    def _probe(self, s: State, early: bool) -> None:
        s.mode, s.lockout = "probe", s.lockout and early
        s.probe_left = max(1, self.early_probe_cycles if early else self.probe_cycles)
        s.probe, s.probe_cost, s.burst, s.full_accepts = [], [], self.reduced_burst_cycles, []

    def _early(self, s: State) -> bool:
        window = max(1, self.early_probe_window)
        return (self.early_probe_min_cycles > 0 and not s.lockout
                and s.since_probe >= self.early_probe_min_cycles and len(s.full_accepts) >= window
                and sum(s.full_accepts) / len(s.full_accepts) >= self.early_probe_full_acceptance)

    def update(self, s: State, length: int, accepted: int, seconds: float) -> None:
        commit = 1 + accepted
        if s.mode == "reduced" and length < self.block_tokens:
            s.since_probe += 1
            s.reduced, s.reduced_cost = [*s.reduced, commit][-32:], [*s.reduced_cost, seconds][-32:]
            s.full_accepts = [*s.full_accepts, int(length > 1 and accepted >= length - 1)][
                -max(1, self.early_probe_window):]
            early = self._early(s)
            if early or s.since_probe >= s.burst:
                self._probe(s, early)
            return
        if length < self.block_tokens:
            return
        s.full = [*s.full, commit][-self.window_size:]
        if s.mode == "probe":
            s.probe, s.probe_cost = [*s.probe, commit], [*s.probe_cost, seconds]
            s.probe_left -= 1
            if s.probe_left > 0:
                return
            acceptance, per_cycle = _window_stats(s.probe)
            reduced_speed = sum(s.reduced) / sum(s.reduced_cost) if sum(s.reduced_cost) > 0 else 0.0
            probe_speed = sum(s.probe) / sum(s.probe_cost) if sum(s.probe_cost) > 0 else 0.0
            fast = self.resume_speed_ratio <= 0 or reduced_speed <= 0 or \
                probe_speed >= reduced_speed * self.resume_speed_ratio
            if acceptance >= self.resume_acceptance_threshold and per_cycle >= self.tpc_threshold and fast:
                s.mode, s.since_probe, s.burst, s.probe_left = "full", 0, self.reduced_burst_cycles, 0
                s.probe, s.probe_cost, s.full_accepts, s.full = [], [], [], []
            else:
                self._reduce(s, lockout=True)
            return
        if len(s.full) >= self.window_size:
            acceptance, per_cycle = _window_stats(s.full)
            if acceptance < self.drop_acceptance_threshold or per_cycle < self.tpc_threshold:
                self._reduce(s)


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
    reads_time = False
    TERMS: ClassVar[dict[str, str]] = {"block_tokens": "full_block_tokens",
                                       "probe_cycles": "# probe_cycles_remaining on entering a probe",
                                       "resume_commits": "# the probe average that resumes"}

    def start(self, prompt_length: int) -> State:
        long = prompt_length >= self.long_context_prompt_tokens
        return State(mode="reduced" if long else "full", since_probe=0, probe_left=0, cooldown=0, full=[],
                      probe=[], burst=self.long_context_burst_cycles if long else self.reduced_burst_cycles)

    block = DflashMlx.block
    choices = DflashMlx.choices

    def update(self, s: State, length: int, accepted: int, seconds: float) -> None:
        commit = 1 + accepted
        if s.mode == "reduced" and length < self.block_tokens:
            s.since_probe += 1
            if s.since_probe >= s.burst:
                s.mode, s.probe_left, s.probe = "probe", self.probe_cycles, []
                s.burst = self.reduced_burst_cycles
            return
        if length < self.block_tokens:
            return
        s.full = [*s.full, commit][-self.window_size:]
        if s.mode == "probe":
            s.probe, s.probe_left = [*s.probe, commit], max(0, s.probe_left - 1)
            if commit > self.min_block_tokens or sum(s.probe) / len(s.probe) >= self.resume_commits:
                s.mode, s.cooldown, s.since_probe, s.probe, s.probe_left = "full", self.window_size, 0, [], 0
            elif s.probe_left <= 0:
                s.mode, s.since_probe, s.probe = "reduced", 0, []
            s.burst = self.reduced_burst_cycles
            return
        if s.cooldown > 0:
            s.cooldown -= 1
            return
        average = sum(s.full) / len(s.full)
        if len(s.full) >= self.window_size and average <= self.low_commit_threshold and \
                average <= self.recent_low_commit_threshold and max(s.full) <= self.high_commit_guard:
            s.mode, s.since_probe, s.burst = "reduced", 0, self.reduced_burst_cycles


dflash_mlx_policy = field_policy("dflash-mlx", DflashMlx)
dflash_mlx_count_policy = field_policy("dflash-mlx-count", DflashMlxCount)
