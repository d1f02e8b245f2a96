"""One cycle at a time: the cycle record, the :class:`CycleSource` protocol live decoding, replay and the step
environments follow, the :class:`Plan` a policy decides, and :func:`run`, the loop. No torch here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Protocol

from specpolicy.arguments import check_block_size, check_count, check_real, check_type, check_verify_length
from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.state import DecodeState, DraftedBlock, chain_tokens


@dataclass(frozen=True)
class CycleRecord:
    """One draft -> verify -> commit cycle (timings 0 where untimed): ``accepted`` drafts passed (0..L-1),
    ``committed`` tokens kept (< accepted + 1 only at a stop or the budget), ``verified``: L if < B."""

    block_size: int
    accepted: int
    committed: int
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    verified: int = 0

    @property
    def verify_length(self) -> int:
        """L: the tokens the target verified (anchor + drafts), B unless a verify rule cut the block."""
        return self.verified or self.block_size


@dataclass(frozen=True)
class _Always:
    """A fixed plan's block rule: a class, not a lambda, so an engine can tell a plan that never changes B."""

    size: int
    LANES, reads_time = True, False  # lockstep replay runs it (``size`` [lanes])

    def __call__(self, state: DecodeState) -> int:
        return self.size

    @property
    def plain(self) -> bool:
        """Plain decoding: steps priced as no drafting engine's (:meth:`CostTable.fixed_cycle_seconds`)."""
        return self.size == 1

    def choices(self) -> set[int]:
        return {self.size}

    def start(self, prompt_length: Any) -> SimpleNamespace:
        return SimpleNamespace()

    def block(self, state: SimpleNamespace, batch: int = 1) -> Any:
        return self.size

    def update(self, state: SimpleNamespace, length: Any, accepted: Any, seconds: Any, block: Any) -> None:
        pass


@dataclass(frozen=True)
class AnchorActions:
    """A plan that reads only the anchor (the per-cycle oracle's): (B, L) of the cycle at anchor ``first + i``
    is ``actions[i]`` (B = 0: what the plan was built from did not reach the anchor; ``missing`` says so)."""

    first: int
    actions: tuple[tuple[int, int], ...]
    missing: str = "was not replayed"

    LANES, reads_time = True, False  # whole blocks: lockstep replay runs it (fields stacked over lanes)

    def __post_init__(self) -> None:
        check_count(self.first, "AnchorActions' first anchor", least=0)
        actions = self.actions if isinstance(self.actions, tuple) else [self.actions]
        with suppress(TypeError):  # each distinct action once (an unhashable one is refused below)
            actions = set(actions)
        for action in actions:
            if not (isinstance(action, tuple) and len(action) == 2):
                raise ValueError(f"AnchorActions' actions must be a tuple of (B, L) pairs, got {action!r}")
            if action != (0, 0):  # (0, 0): an anchor the plan did not reach
                check_verify_length(action[1], check_block_size(action[0]))

    def at(self, position: int) -> tuple[int, int]:
        """(B, L) at anchor ``position``, or a ValueError naming it."""
        i = position - self.first
        if not 0 <= i < len(self.actions) or not self.actions[i][0]:
            raise ValueError(f"anchor {position} {self.missing}")
        return self.actions[i]

    def __call__(self, state: DecodeState) -> int:
        return self.at(state.position)[0]

    def length(self, state: DecodeState, drafted: DraftedBlock) -> int:
        return self.at(state.position)[1]

    def choices(self) -> set[int]:
        return {b for b, _ in set(self.actions) if b}

    def start(self, prompt_length: Any) -> SimpleNamespace:
        """Over lanes (``first`` [lanes], ``actions`` [lanes, n, 2]): each lane's anchor [lanes]."""
        return SimpleNamespace(position=prompt_length)

    def block(self, state: SimpleNamespace, batch: int = 1) -> Any:
        return self.actions[range(len(state.position)), state.position - self.first, 0]

    def update(self, state: SimpleNamespace, length: Any, accepted: Any, seconds: Any, block: Any) -> None:
        state.position = state.position + accepted + 1


@dataclass(frozen=True)
class ConfidentPrefix:
    """A verify rule as a value: L = 1 + the drafts whose confidence (``running``: the running product) stays
    >= ``threshold``; ``running=False`` is llama.cpp's p_min (the drafts before the first below it), which its
    server runs from a flag or a request."""

    threshold: float
    running: bool = True

    def __post_init__(self) -> None:
        check_real(self.threshold, "ConfidentPrefix's threshold (a probability)", 0.0, 1.0)
        check_type(self.running, bool, "ConfidentPrefix's running", "True: the running product")

    def __call__(self, state: DecodeState, drafted: DraftedBlock) -> int:
        return self.length(drafted.confidences)

    def length(self, confidences: Sequence[float]) -> int:
        """L for a block whose drafts have ``confidences``."""
        product, length = 1.0, 1
        for confidence in confidences:
            product = product * confidence if self.running else confidence
            if product < self.threshold:
                break
            length += 1
        return length


@dataclass(frozen=True)
class CostAwareLength:
    """The marginal verify rule as a value (``marginal``'s, ``adaptive-verify``'s): of a drafted block of B,
    the L with the most expected tokens per modelled second, (1 + sum_k prod_{i<k} c_i) / ``seconds[B][L-1]``;
    an engine that knows the rule (a patched llama-server) runs :meth:`request` instead."""

    seconds: tuple[tuple[int, tuple[float, ...]], ...]
    """(B, modelled seconds of a cycle drafting B and verifying L = 1..B) of every B it may see"""

    def __post_init__(self) -> None:
        for block, row in self.seconds:
            if check_block_size(block) != len(row):
                raise ValueError(f"CostAwareLength prices B = {block} at L = 1..{block}, got {row!r}")
            for seconds in row:
                check_real(seconds, f"CostAwareLength's seconds at B = {block}", 0.0, strict_low=True)

    def __call__(self, state: DecodeState, drafted: DraftedBlock) -> int:
        row, expected = dict(self.seconds)[drafted.block_size], chain_tokens(drafted.confidences)
        return max(range(1, len(expected) + 1), key=lambda length: expected[length - 1] / row[length - 1])

    def request(self) -> dict:
        """The rule as a patched llama-server's ``speculative.plan`` fields (engines/patches)."""
        return {"lengths": [b for b, _ in self.seconds], "length_seconds": [list(r) for _, r in self.seconds]}


@dataclass(frozen=True)
class Plan:
    """What an engine runs for one prompt: B before every cycle and, optionally, L <= B after every draft.

    ``block(state) -> B``; ``length(state, drafted) -> L`` (``None``: whole blocks); ``reads_block=False``: L
    depends on the position only (an oracle's), so replays without confidences run it."""

    block: Callable[[DecodeState], int]
    length: Callable[[DecodeState, DraftedBlock], int] | None = None
    reads_block: bool = True
    block_size: int | None = None
    """the one block size of a fixed plan (:meth:`fixed`), else ``None``"""

    def __post_init__(self) -> None:
        if isinstance(self.block, ConfidentPrefix) or not callable(self.block):
            raise ValueError(f"a Plan's block rule picks B from the decode state, got {self.block!r}; a "
                             "verify rule goes second: Plan.fixed(B).with_length(ConfidentPrefix(p))")
        if self.length is not None and not callable(self.length):
            raise ValueError(f"a Plan's length picks L after a draft (a callable, or None): {self.length!r}")
        if isinstance(self.block, AnchorActions) and self.length is None and any(  # its L, as engines read
                b != length for b, length in set(self.block.actions)):
            object.__setattr__(self, "length", self.block.length)
            object.__setattr__(self, "reads_block", False)

    @classmethod
    def fixed(cls, block_size: int, length: int | None = None) -> Plan:
        """The null plan: B every cycle, verifying L of it (default: the whole block)."""
        size = check_block_size(block_size)
        if length is None:
            return cls(_Always(size), block_size=size)
        verify = check_verify_length(length, MAX_BLOCK_SIZE)
        return cls(_Always(size), lambda state, drafted: min(verify, drafted.block_size), False, size)

    @property
    def always(self) -> int | None:
        """B where the plan runs whole blocks of one size, reading nothing (:meth:`fixed`), else ``None``."""
        return self.block.size if isinstance(self.block, _Always) and self.length is None else None

    def known_sizes(self) -> set[int] | None:
        """Every B the plan can pick where its rule says (:meth:`fixed`, :class:`AnchorActions`, a rule's
        ``choices()``), or None."""
        return self.block.choices() if callable(getattr(self.block, "choices", None)) else None

    def with_length(self, length: Callable[[DecodeState, DraftedBlock], int], reads_block: bool = True
                    ) -> Plan:
        """This plan's block sizes, with ``length`` picking L after every draft."""
        return replace(self, length=length, reads_block=reads_block)

    def cycle_length(self, state: DecodeState, size: int, drafted: Callable[[], DraftedBlock]) -> int | None:
        """L of a cycle of ``size`` (``None``: whole), calling ``drafted()`` only where the plan reads it."""
        if self.length is None or size == 1:
            return None
        block = drafted() if self.reads_block else DraftedBlock(check_block_size(size))
        return self.verify_length(state, block) if block.block_size else None

    def verify_length(self, state: DecodeState, drafted: DraftedBlock) -> int:
        """L for ``drafted`` (its size B by default), checked to lie in 1..B."""
        return drafted.block_size if self.length is None else check_verify_length(
            self.length(state, drafted), drafted.block_size)


class CycleSource(Protocol):
    """A decode advanced one cycle per :meth:`step`; :attr:`state` is current before every cycle."""

    state: DecodeState
    done: bool

    def step(self, block_size: int, length: int | None = None) -> CycleRecord:
        """Run a cycle of ``block_size`` (1: an AR step) verifying ``length`` of it (all); its record."""
        ...

    def draft(self, block_size: int) -> DraftedBlock:
        """The first half of a cycle: draft a block of ``block_size`` and return it (nothing verified yet)."""
        ...

    def verify(self, length: int | None = None) -> CycleRecord:
        """The second half: the target verifies the first ``length`` tokens of the block; its record."""
        ...


def run(source: CycleSource, plan: Plan) -> list[CycleRecord]:
    """Drive ``source`` to the end with ``plan``; the cycles it ran (a step that commits nothing ends it)."""
    check_type(plan, Plan, "plan", "Plan.fixed(16), or a policy's plan(observation)")
    cycles: list[CycleRecord] = []
    while not source.done:
        cycle = run_cycle(source, plan)
        if cycle.committed:
            cycles.append(cycle)
    return cycles


def run_cycle(source: CycleSource, plan: Plan) -> CycleRecord:
    """One cycle of ``plan`` on ``source``: B from the state; then, where the plan sets L, the block is
    drafted first and L read from it (a length by position needs no drafted block)."""
    size = plan.block(source.state)
    if plan.length is None:  # whole blocks: one step
        return source.step(size)
    if size == 1 or not plan.reads_block:  # L needs no drafted block: one step
        return source.step(size, plan.cycle_length(source.state, size, lambda: DraftedBlock(size)))
    drafted = source.draft(size)
    return source.verify(plan.cycle_length(source.state, size, lambda: drafted))
