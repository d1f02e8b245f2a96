"""A replayed decode stepped one cycle at a time (:class:`~specpolicy.cycles.CycleSource`): the protocol live
decoding's ``DecodeSession`` also speaks, over a :class:`~specpolicy.replay.table.ReplayTable` (no torch)."""

from __future__ import annotations

from typing import Any, Protocol

from specpolicy.arguments import check_verify_length
from specpolicy.cycles import CycleRecord
from specpolicy.state import DecodeState, DraftedBlock


class Replayed(Protocol):
    """What a session steps over: a :class:`~specpolicy.replay.table.ReplayTable` (named in words)."""

    def start(self) -> tuple[int, int, bool]: ...
    def initial_state(self, prefill_logits: Any = None) -> DecodeState: ...
    def checked_size(self, block_size: object) -> int: ...
    def drafted_block(self, position: int, block_size: int) -> DraftedBlock: ...
    def cycle(self, position: int, produced: int, size: int, length: int | None = None
              ) -> tuple[CycleRecord, int, int, bool]: ...


class ReplaySession:
    """A replayed decode, a cycle per :meth:`step` (the :class:`~specpolicy.cycles.CycleSource` protocol)."""

    def __init__(self, table: Replayed, prefill_logits: Any = None) -> None:
        self.table = table
        self.position, _, self.done = table.start()
        self.state = table.initial_state(prefill_logits)
        self.cycles: list[CycleRecord] = []
        self._drafted: int | None = None  # the block size drafted and not yet verified

    def step(self, block_size: int, length: int | None = None) -> CycleRecord:
        """Replay one cycle of ``block_size`` (one of the table's candidates) at the current anchor,
        verifying ``length`` tokens of it (default: all)."""
        size = self._check(block_size)
        return self._finish(size, check_verify_length(length, size, cap=True))

    def draft(self, block_size: int) -> DraftedBlock:
        """The first half of a cycle: what a live draft of ``block_size`` gives here (then :meth:`verify`)."""
        size = self._check(block_size)
        block = self.table.drafted_block(self.position, size)
        self._drafted = size
        return block

    def verify(self, length: int | None = None) -> CycleRecord:
        """The second half: verify the first ``length`` tokens of the drafted block (default: all)."""
        if self._drafted is None:
            raise RuntimeError("no drafted block to verify: call draft(block_size) first")
        size, self._drafted = self._drafted, None
        return self._finish(size, check_verify_length(length, size, cap=True))

    def _finish(self, size: int, length: int) -> CycleRecord:
        """The cycle of ``size`` verifying ``length`` at the anchor, recorded and the state advanced."""
        cycle, self.position, produced, self.done = self.table.cycle(self.position, self.state.generated,
                                                                     size, length)
        self.cycles.append(cycle)
        # the state's anchor follows the output, as live decoding's does (a cut last cycle ends short of it)
        self.state.advance(cycle, produced)
        return cycle

    def _check(self, block_size: int) -> int:
        """``block_size`` as an int, when a cycle may start with it here (a candidate; no block waiting)."""
        if self.done:
            raise RuntimeError("the replayed decode has ended; start a new session")
        if self._drafted is not None:
            raise RuntimeError("a drafted block is waiting: call verify(length) before drafting another")
        return self.table.checked_size(block_size)
