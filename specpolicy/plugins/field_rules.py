"""The field's DFlash controllers as plan values, each its engine's code at its shipped defaults (overrides as
``name=value`` pairs, as the engine rules: ``dflash-mlx:min_block_tokens=8``).

- ``dflash-mlx``: dflash-mlx's ``_AdaptiveBlockPolicy`` (``dflash_mlx/engine/spec_epoch.py`` @0e8455d,
  ``--verify-mode adaptive``): the full block until a window of full-block cycles accepts under 0.75 of its
  tokens or commits under 3.5 per cycle, then the reduced block; after a burst of reduced cycles (or early,
  where reduced blocks are fully accepted) a probe of full blocks returns to them only if it accepted,
  committed and ran at least as fast as the reduced block (time: the cost table's, in replay and live alike).
- ``dflash-mlx-count``: the same policy before its speed gate (window 4: average commits <= 3.0 and the most
  <= 5 reduce; bursts of 24; a two-cycle probe resumes on one commit above the reduced block or an average of
  4.25, then a cooldown of the window).
- ``sglang-adaptive``: SGLang's adaptive speculative steps (``speculative/adaptive_spec_params.py`` @015c872,
  #21599, per batch-size slots of #24055): an EMA (alpha 0.2) of accepted drafts, after 10 warm-up verifies
  every 5th re-picks the steps between its slot's candidates by thresholds at step - 0.5 with hysteresis;
  the slot is the largest configured batch size <= the batch; B = steps + 1. ``candidate_steps``,
  ``up_hysteresis`` and ``down_hysteresis`` set the batch-one slot (#21599's default was 1/3/7).
- ``mistralrs-dflash``: mistral.rs's DFlash depth (``speculative/dflash.rs`` @48be6c1,
  ``MISTRALRS_DFLASH_ADAPTIVE=1``): ``max_drafts`` drafts at batches <= 2, one draft above.

State is per request: engines that keep one controller per server (SGLang's slots) carry it across requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from specpolicy.arguments import check_count, check_real
from specpolicy.costs import CostTable
from specpolicy.cycles import Plan
from specpolicy.plugins.cycle_rules import required_costs
from specpolicy.plugins.engine_rules import engine_args
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.state import DecodeState


class _State:
    """A controller's state for one request (the attributes its ``start`` sets)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


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

    def start(self, prompt_length: int) -> _State:
        long = prompt_length >= self.long_context_prompt_tokens
        return _State(mode="reduced" if long else "full", since_probe=0, probe_left=0, lockout=False,
                      burst=self.long_context_burst_cycles if long else self.reduced_burst_cycles,
                      full=[], probe=[], probe_cost=[], reduced=[], reduced_cost=[], full_accepts=[])

    def block(self, s: _State, batch: int) -> int:
        return min(self.block_tokens, self.min_block_tokens) if s.mode == "reduced" else self.block_tokens

    def choices(self) -> set[int]:
        return {self.block_tokens, min(self.block_tokens, self.min_block_tokens)}

    def _reduce(self, s: _State, lockout: bool = False) -> None:
        s.mode, s.since_probe, s.burst, s.probe_left = "reduced", 0, self.reduced_burst_cycles, 0
        s.lockout = lockout
        s.probe, s.probe_cost, s.reduced, s.reduced_cost, s.full_accepts, s.full = [], [], [], [], [], []

    def _probe(self, s: _State, early: bool) -> None:
        s.mode, s.lockout = "probe", s.lockout and early
        s.probe_left = max(1, self.early_probe_cycles if early else self.probe_cycles)
        s.probe, s.probe_cost, s.burst, s.full_accepts = [], [], self.reduced_burst_cycles, []

    def _early(self, s: _State) -> bool:
        window = max(1, self.early_probe_window)
        return (self.early_probe_min_cycles > 0 and not s.lockout
                and s.since_probe >= self.early_probe_min_cycles and len(s.full_accepts) >= window
                and sum(s.full_accepts) / len(s.full_accepts) >= self.early_probe_full_acceptance)

    def update(self, s: _State, length: int, accepted: int, seconds: float) -> None:
        commit = 1 + accepted
        if s.mode == "reduced" and length < self.block_tokens:
            s.since_probe += 1
            s.reduced, s.reduced_cost = [*s.reduced, commit][-32:], [*s.reduced_cost, seconds][-32:]
            s.full_accepts = [*s.full_accepts, int(length > 1 and accepted >= length - 1)][
                -max(1, self.early_probe_window):]
            if self._early(s) or s.since_probe >= s.burst:
                self._probe(s, early=self._early(s))
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

    def start(self, prompt_length: int) -> _State:
        long = prompt_length >= self.long_context_prompt_tokens
        return _State(mode="reduced" if long else "full", since_probe=0, probe_left=0, cooldown=0, full=[],
                      probe=[], burst=self.long_context_burst_cycles if long else self.reduced_burst_cycles)

    block = DflashMlx.block
    choices = DflashMlx.choices

    def update(self, s: _State, length: int, accepted: int, seconds: float) -> None:
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
    reads_time = False

    def slots(self) -> dict[int, tuple[tuple[int, ...], float, float]]:
        return {**SGLANG_SLOTS, 1: (tuple(sorted(set(self.candidate_steps))), self.up_hysteresis,
                                    self.down_hysteresis)}

    def start(self, prompt_length: int) -> _State:
        steps = {key: self.initial_steps if self.initial_steps in c else c[len(c) // 2]
                 for key, (c, _, _) in self.slots().items()}
        return _State(steps=steps, ema={key: float(s - 1) for key, s in steps.items()},
                      count=dict.fromkeys(steps, 0), batch=1)

    def _slot(self, batch: int) -> int:
        return max([key for key in self.slots() if key <= batch], default=min(self.slots()))

    def block(self, s: _State, batch: int) -> int:
        s.batch = batch
        return s.steps[self._slot(batch)] + 1

    def choices(self) -> set[int]:
        return {step + 1 for candidates, _, _ in self.slots().values() for step in candidates}

    def update(self, s: _State, length: int, accepted: int, seconds: float) -> None:
        key = self._slot(s.batch)
        if s.steps[key] > 0:
            s.ema[key] = (1 - self.ema_alpha) * s.ema[key] + self.ema_alpha * accepted
        s.count[key] += 1
        after = s.count[key] - self.warmup_batches
        if after > 0 and after % self.update_interval == 0:
            s.steps[key] = self._recompute(key, s.steps[key], s)

    def _recompute(self, key: int, old: int, s: _State) -> int:
        candidates, up, down = self.slots()[key]
        i = candidates.index(old)
        if old == 0:
            i = min(i + 1, len(candidates) - 1)
            if candidates[i] > 0 and s.ema[key] < 0:
                s.ema[key] = float(candidates[i] - 1)
            return candidates[i]
        old_index = i
        while i > 0 and s.ema[key] <= (0.5 if candidates[i - 1] == 0 else candidates[i - 1] - 0.5) + down:
            i -= 1
        while i == old_index and i < len(candidates) - 1 and s.ema[key] > candidates[i] - 0.5 + up:
            i = old_index = i + 1  # up only where it did not move down
        return candidates[i]


@dataclass(frozen=True)
class MistralrsDflash:
    max_drafts: int = 7
    adaptive: int = 1
    full_depth_max_batch: int = 2
    reads_time = False

    def start(self, prompt_length: int) -> _State:
        return _State()

    def block(self, s: _State, batch: int) -> int:
        full = not self.adaptive or self.max_drafts == 0 or batch <= self.full_depth_max_batch
        return (self.max_drafts if full else min(1, self.max_drafts)) + 1

    def choices(self) -> set[int]:
        return {self.max_drafts + 1, min(1, self.max_drafts) + 1 if self.adaptive else self.max_drafts + 1}

    def update(self, s: _State, length: int, accepted: int, seconds: float) -> None:
        """Stateless: the depth follows the batch."""


Controller = DflashMlx | DflashMlxCount | SglangAdaptive | MistralrsDflash


@dataclass(frozen=True)
class FieldRule:
    """A field controller as a plan's block rule: its state folded over the request's finished cycles (each
    seen at its verified length L, the tokens an engine counts, priced by ``costs`` where it reads time)."""

    controller: Controller
    costs: CostTable | None = field(default=None, compare=False, repr=False)

    def __call__(self, state: DecodeState) -> int:
        controller, costs, verified = self.controller, self.costs, state.verify_history

        def update(s: _State | None, i: int) -> _State:
            s = s or controller.start(state.prompt_length)
            block, length = state.block_size_history[i], verified[i]
            controller.update(s, length, state.accepted_history[i],
                              costs.split_cycle_seconds(block, length) if costs else 0.0)
            return s

        folded = state.fold(f"_field{id(controller)}", None, update) or controller.start(state.prompt_length)
        return controller.block(folded, state.batch)


class FieldPolicy(Policy):
    """A field controller run per request."""

    per_step = True

    def __init__(self, candidates: Sequence[int], controller: Controller) -> None:
        super().__init__(candidates)
        self.controller = controller

    def choices(self) -> set[int]:
        return self.controller.choices()

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        costs = required_costs(self, observation) if self.controller.reads_time else None
        return Plan(FieldRule(self.controller, costs))


def _checked(family: str, controller: Controller) -> Controller:
    """``controller`` whose counts are >= 0 (sizes >= 1) and rates finite, else a ValueError naming them."""
    for f in fields(controller):
        value, name = getattr(controller, f.name), f"{family}: {f.name}"
        if isinstance(value, tuple):
            for step in value or [None]:
                check_count(step, f"{name} (steps, joined by '/')", least=0)
        elif isinstance(value, float):
            check_real(value, name, -1.0, 1e6)
        else:
            check_count(value, name, least=1 if f.name.endswith(("tokens", "drafts", "size", "interval",
                                                                  "window")) else 0)
    return controller


def field_policy(family: str, settings: type) -> object:
    def factory(arg: str | None, candidates: Sequence[int]) -> FieldPolicy:
        return FieldPolicy(candidates, _checked(family, engine_args(family, arg, settings)))
    return factory


dflash_mlx_policy = field_policy("dflash-mlx", DflashMlx)
dflash_mlx_count_policy = field_policy("dflash-mlx-count", DflashMlxCount)
sglang_adaptive_policy = field_policy("sglang-adaptive", SglangAdaptive)
mistralrs_dflash_policy = field_policy("mistralrs-dflash", MistralrsDflash)
