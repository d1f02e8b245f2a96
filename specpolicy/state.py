"""What a per-cycle policy sees before each cycle (and a verify rule after the draft), the one rule of what a
cycle commits and where a decode ends, and tau (shared by live decoding, replay and the envs; no torch)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from specpolicy.costs import CostTable

Folded = TypeVar("Folded")


@dataclass
class DecodeState:
    """The decoder's state before a cycle: ``prefill_logits`` [V] (may be empty in replay), ``position`` (the
    anchor's), ``generated`` (tokens so far, the prefill token included) and one history entry per cycle."""

    prefill_logits: Any
    prompt_length: int
    position: int
    cycle: int
    generated: int
    accepted_history: list[int] = field(default_factory=list)
    block_size_history: list[int] = field(default_factory=list)
    verify_history: list[int] = field(default_factory=list)
    """verify length L of each finished cycle (B unless a verify rule cut the block)"""
    batch: int = 1
    """requests in the engine step the next cycle runs in (set by the serving simulation; 1 elsewhere)"""
    batch_costs: CostTable | None = None
    """the per-request :class:`~specpolicy.costs.CostTable` at that batch (serving simulation; else None)"""
    pooled: DecodeState | None = None
    """every request's cycles in the order the engine ran them (serving simulation; else ``None``)"""

    @classmethod
    def after_prefill(cls, prefill_logits: Any, prompt_length: int) -> DecodeState:
        """The state right after prefill, before the first cycle (the one constructor every engine uses):
        the anchor is the prefill's token, at position ``prompt_length``."""
        return cls(prefill_logits, int(prompt_length), int(prompt_length), 0, 1)

    def advance(self, cycle: Any, generated: int) -> None:
        """The one update after a cycle (live, replay, transformers' loop): the ``cycle`` record if it
        committed tokens, the tokens output so far (``generated``) and the anchor after them."""
        if cycle.committed:  # record()'s appends, inline: replay advances millions of times
            self.block_size_history.append(cycle.block_size)
            self.accepted_history.append(cycle.accepted)
            self.verify_history.append(cycle.verify_length)
        self.generated = int(generated)
        self.position = self.prompt_length + self.generated - 1
        self.cycle = len(self.block_size_history)

    def fold(self, key: Hashable, initial: Folded, update: Callable[[Folded, int], Folded]) -> Folded:
        """``update(value, i)`` folded over the finished cycles i, kept on the state under ``key`` and carried
        on from the cycles added since the last call (from ``initial`` again if the histories were replaced):
        the one way per-cycle rules read a long history in O(1) per decision."""
        value, seen = self.__dict__.get(key, (initial, 0))
        done = len(self.accepted_history)
        if seen != done or key not in self.__dict__:
            if seen > done:
                value, seen = initial, 0
            for i in range(seen, done):
                value = update(value, i)
            self.__dict__[key] = (value, done)
        return value

    def record(self, block_size: int, accepted: int, verify_length: int | None = None) -> None:
        """Append one finished cycle to the histories."""
        self.block_size_history.append(int(block_size))
        self.accepted_history.append(int(accepted))
        self.verify_history.append(int(verify_length or block_size))


def context_cap(block_size: int, position: int, max_positions: int | None) -> int:
    """Tokens a block of ``block_size`` at ``position`` can verify within ``max_positions`` (``None``: no
    limit). A capped cycle keeps the policy's B and records the cap as its L."""
    return block_size if max_positions is None else max(0, min(block_size, max_positions - position))


def commit_length(offered: Any, first_stop: Any, room: Any) -> tuple[Any, Any]:
    """The one commit rule, elementwise over ints or arrays: of ``offered`` tokens with the first stop token
    at ``first_stop``, how many are kept (cut after the stop, then to ``room``) and why decoding ends
    (``STOPPED``, ``BUDGET``, else 0; a stop cut off by the budget counts as the budget)."""
    stopped = (first_stop < offered) * 1  # plain arithmetic: the same expression for ints and arrays
    kept = offered + stopped * (first_stop + 1 - offered)
    budget = (kept > room) | ((kept == room) & (1 - stopped))
    return kept + budget * (room - kept), budget * BUDGET + (1 - budget) * stopped * STOPPED


STOPPED, BUDGET = 1, 2
REASONS = {0: "", STOPPED: "stop_token", BUDGET: "max_new_tokens"}


def commit_tokens(new_tokens: list[int], stops: set[int], room: int) -> tuple[list[int], str]:
    """The tokens a cycle keeps, and why decoding ends there (``""`` when it goes on): :func:`commit_length`
    on a list. Live decoding, plain AR and exact replay share it."""
    first_stop = next((i for i, token in enumerate(new_tokens) if token in stops), len(new_tokens))
    kept, reason = commit_length(len(new_tokens), first_stop, room)
    return new_tokens[: int(kept)], REASONS[int(reason)]


@dataclass(frozen=True)
class DraftedBlock:
    """The drafter's block before verification (``block_size`` 0: no position left): ``confidences`` and
    ``entropies`` [B - 1] of each draft, float16-rounded so live and replay agree (empty at B = 1)."""

    block_size: int
    confidences: tuple[float, ...] = ()
    entropies: tuple[float, ...] = ()


def mean_acceptance(cycles: Sequence[Any]) -> float:
    """tau, the field's, and its one definition: tokens committed per cycle over ``cycles`` (0 without), so a
    cycle cut by the budget or a stop counts what it kept (Spec-Bench's mean accepted tokens, vLLM's mean
    acceptance length); pooled over prompts by :meth:`~specpolicy.evaluation.metrics.PolicyResults.tau`."""
    return sum(c.committed for c in cycles) / len(cycles) if cycles else 0.0


def chain_tokens(rates: Iterable[float]) -> list[float]:
    """Expected tokens of a cycle verifying 1, 2, ... tokens where draft k lands with ``rates[k]`` once the
    drafts before it did: 1 + sum_k prod_{i<=k} rates[i] (one float per length)."""
    return list(itertools.accumulate(itertools.accumulate(rates, operator.mul), initial=1.0))
