"""Rules over lanes: a rule whose state is numpy arrays [lanes] (one lane a request), run on many prompts at
once by lockstep replay and on one lane elsewhere (:func:`lane_state`); the cost-aware block rule is one."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields
from types import SimpleNamespace
from typing import Any

import numpy as np

from specpolicy.arguments import check_block_size, check_count, check_real
from specpolicy.costs import expected_tokens
from specpolicy.state import DecodeState

State = SimpleNamespace  # a rule's state over lanes (what its ``start`` sets; arrays [lanes] with ``LANES``)
Lane = np.ndarray  # a value at every lane [lanes]


def lanes(prompt_length: np.ndarray, value: object, dtype: type = np.int64) -> np.ndarray:
    """``value`` (a parameter: one, or one per lane) at every lane of ``prompt_length`` [lanes]."""
    return np.zeros(np.shape(prompt_length), dtype=dtype) + value


def lane_state(rule: Any, state: DecodeState, seconds: Callable[[int, int], float],
               start: Callable[[], State] | None = None, key: Hashable = None) -> State:
    """``rule``'s state after ``state``'s cycles: ``start()`` (default: the rule's, one lane), then
    ``rule.update(s, L, accepted, seconds(B, L), B)`` per cycle (arrays of one lane with ``LANES``), kept on
    ``state`` under ``key`` (default: the rule's value), the state a decision marks the one updated next."""
    one = (lambda value: np.array([value])) if getattr(rule, "LANES", False) else (lambda value: value)
    start = start or (lambda: rule.start(np.array([state.prompt_length])))

    def update(s: State | None, i: int) -> State:
        s = s or start()
        block, length = state.block_size_history[i], state.verify_history[i]
        rule.update(s, one(length), one(state.accepted_history[i]), one(seconds(block, length)), one(block))
        return s

    key = key or ("_rule", rule)
    return state.fold(key, None if key in vars(state) else start(), update)


def lane_block(rule: Any, state: DecodeState, seconds: Callable[[int, int], float],
               start: Callable[[], State] | None = None) -> tuple[State, int]:
    """(:func:`lane_state`, the next B of the one request ``state`` decodes, by ``rule``)."""
    s = lane_state(rule, state, seconds, start)
    return s, int(np.ravel(rule.block(s, state.batch))[0])


def fold_acceptance(s: State, length: Lane, accepted: Lane, decay: Any, where: Any = True) -> None:
    """A cycle verifying L folded into ``s``'s acceptance sums (``successes``, ``trials``: [lanes], or [lanes,
    decays]) where a speculative verify (L > 1) ran: its accepted and tried drafts, older cycles weighing
    ``decay`` less each."""
    judged, accepted = (np.reshape(x, (-1,) + (1,) * (np.ndim(s.successes) - 1)) for x in
                        (where & (length > 1), accepted))
    tried = accepted + (accepted < np.reshape(length, np.shape(accepted)) - 1)
    s.successes = np.where(judged, accepted + decay * s.successes, s.successes)
    s.trials = np.where(judged, tried + decay * s.trials, s.trials)


def acceptance_rate(s: State, prior: Any, prior_weight: Any) -> np.ndarray:
    """Per-draft acceptance of a geometric model from ``s``'s sums, the prior weighing ``prior_weight``."""
    return np.minimum((prior * prior_weight + s.successes) / (prior_weight + s.trials), 0.999)


@dataclass(frozen=True)
class CostAwareBlocks:
    """The cost-aware block rule as a value (``adaptive``'s, and the default's guard): the most expected
    tokens per modelled second at the acceptance so far, plain steps where no block would pay or after failed
    cycles; its choices, prices and parameters are its fields, so lockstep replay runs it over lanes, Python
    on one lane and a patched llama-server from :meth:`request`, all alike. ``choose``: the rule a server
    runs first (a pooled one; ``None`` from it: this one)."""

    blocks: tuple[int, ...]  # the speculative block sizes it chooses among (B > 1), ascending
    seconds: tuple[tuple[int, float], ...]  # (B, modelled seconds of a cycle) of every B a cycle may have
    ar_seconds: float
    ar_allowed: bool
    start_block: int  # the first cycle's B
    seen_block: int  # > 0: a failed probe of this B counted before the first cycle (a start of B = 1)
    prior: float
    prior_weight: float
    decay: float
    first_wait: int
    max_wait: int
    wait_scale: float
    optimism: float
    choose: Callable[[DecodeState], int | None] | None = field(compare=False, repr=False, default=None)
    reads_time, LANES = True, True  # reads each cycle's price; its state is arrays [lanes]

    def __post_init__(self) -> None:
        blocks = [check_block_size(b) for b in self.blocks]
        if not blocks or blocks != sorted(set(blocks)):
            raise ValueError(f"CostAwareBlocks' blocks must be ascending block sizes, got {self.blocks!r}")
        for name, value in (("ar_seconds", self.ar_seconds), *((f"seconds at B = {b}", s) for b, s in
                                                                self.seconds)):
            check_real(value, f"CostAwareBlocks' {name}", 0.0, strict_low=True)
        for name, low, high in (("prior", 0, 1), ("decay", 0, 1), ("prior_weight", 0, math.inf),
                                ("wait_scale", -math.inf, math.inf), ("optimism", -math.inf, math.inf)):
            check_real(getattr(self, name), f"CostAwareBlocks' {name}", low, high)
        for name in ("start_block", "seen_block", "first_wait", "max_wait"):
            check_count(getattr(self, name), f"CostAwareBlocks' {name}", least=0)

    def __call__(self, state: DecodeState) -> int:
        served = self.choose(state) if self.choose is not None else None
        return served if served is not None else lane_block(
            self, state, lambda block, length: dict(self.seconds).get(block, self.ar_seconds))[1]

    def choices(self) -> set[int]:
        return {*np.unique(self.blocks).tolist(), *np.unique(self.start_block).tolist(),
                *([1] if np.any(self.ar_allowed) else [])}

    def start(self, prompt_length: np.ndarray) -> State:
        """The state of ``prompt_length`` [lanes] requests before their first cycle (a failed probe of
        :attr:`seen_block` counted where it is > 0), with each lane's prices [lanes, B + 1] (unpriced B: a
        plain step's)."""
        n = len(prompt_length)
        pairs = np.asarray(self.seconds, float).reshape(*np.shape(self.start_block), -1, 2)
        pairs = np.broadcast_to(pairs, (n, *pairs.shape[-2:]))
        prices = np.zeros((n, max(2, int(pairs[..., 0].max(initial=0)) + 1))) + np.c_[self.ar_seconds]
        prices[np.arange(n)[:, None], pairs[..., 0].astype(np.int64)] = pairs[..., 1]
        blocks = np.broadcast_to(self.blocks, (n, np.shape(self.blocks)[-1]))
        s = State(prices=prices, blocks=blocks, block_seconds=np.take_along_axis(prices, blocks, 1),
                  successes=np.zeros(n), trials=np.zeros(n), failures=np.zeros(n, np.int64),
                  trailing=np.zeros(n, np.int64), cycles=np.zeros(n, np.int64))
        seen = lanes(prompt_length, self.seen_block)
        self._fold(s, seen, seen * 0, prices[np.arange(n), seen], seen, seen > 0)
        return s

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        self._fold(s, length, accepted, seconds, block, True)
        s.cycles = s.cycles + 1

    def _fold(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane, where: Any) -> None:
        """A cycle of B verifying L at ``where``: acceptance sums (older cycles weigh ``decay`` less) over
        speculative verifies; failed speculative cycles in a row (slower than plain steps) and plain ones
        after them."""
        fold_acceptance(s, length, accepted, self.decay, where)
        plain, failed = block == 1, ~self.beats_ar(accepted + 1, seconds)
        s.failures = np.where(where & ~plain, np.where(failed, s.failures + 1, 0), s.failures)
        s.trailing = np.where(where, np.where(plain, s.trailing + 1, 0), s.trailing)

    def beats_ar(self, tokens: Any, seconds: Any) -> Any:
        """Whether ``tokens`` from a cycle of ``seconds`` come at least as fast as from plain steps."""
        return tokens / seconds >= 1 / self.ar_seconds

    def acceptance(self, s: State) -> np.ndarray:
        return acceptance_rate(s, self.prior, self.prior_weight)

    def fastest(self, s: State, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the speculative B with the most expected tokens per second at ``alpha`` [lanes], a tie the
        smaller; whether it beats plain steps)."""
        lane = np.arange(len(alpha))
        best = np.argmax((1 - alpha[:, None] ** s.blocks) / s.block_seconds, axis=1)
        size = s.blocks[lane, best]
        return size, self.beats_ar(expected_tokens(alpha, size), s.block_seconds[lane, best])

    def probes(self, s: State, alpha: np.ndarray) -> np.ndarray:
        """Whether some block beats plain steps at an optimistic acceptance (rejections x ``optimism``):
        plain steps leave the acceptance as it is, so where it is false a plain decode never probes."""
        return self.fastest(s, 1 - (1 - alpha) * self.optimism)[1]

    def owed(self, s: State) -> np.ndarray:
        """Plain cycles [lanes] still owed after the n-th failed speculative cycle in a row: ``first_wait *
        2**(n-1)`` (at most ``max_wait``) x ``wait_scale``, rounded up, at least 1; less those run since."""
        wait = np.minimum(self.max_wait, self.first_wait * np.exp2(s.failures - 1)) * self.wait_scale
        return np.where(s.failures > 0, np.maximum(np.maximum(1, np.ceil(wait)) - s.trailing, 0), 0)

    def block(self, s: State, batch: int) -> np.ndarray:
        """B [lanes] of the next cycle: the start block first, then the fastest block, or a plain step
        where it would not pay and the lane owes plain steps after failures or no block could pay."""
        alpha = self.acceptance(s)
        best, pays = self.fastest(s, alpha)
        plain = self.ar_allowed & ~pays & ((self.owed(s) > 0) | ~self.probes(s, alpha))
        return np.where(s.cycles == 0, self.start_block, np.where(plain, 1, best))

    def request(self) -> dict:
        """The rule as a patched llama-server's ``speculative.plan`` (engines/patches: server_spec_plan)."""
        plan = {"start" if f.name == "start_block" else f.name: getattr(self, f.name) for f in fields(self)
                if f.compare}
        return {**plan, "blocks": list(self.blocks), "priced": [b for b, _ in self.seconds],
                "seconds": [s for _, s in self.seconds]}
