"""The table exact replay reads: every candidate's accepted drafts at every reachable anchor, torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specpolicy.arguments import check_block_size, check_candidate_set, check_type
from specpolicy.costs import CostTable
from specpolicy.cycles import CycleRecord, Plan, run
from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.policy import oracle_label
from specpolicy.replay.schedules import Action, ExactSchedules, Outcomes
from specpolicy.replay.session import ReplaySession
from specpolicy.state import DecodeState, DraftedBlock


@dataclass
class ReplayTable(ExactSchedules):
    """Accepted drafts of every candidate block size at every anchor of one prompt's decode.

    ``accepted[i, j]``: drafts accepted by a block of ``candidates[j]`` anchored at ``prompt_length + i`` (-1:
    unreachable). ``sequence``: prompt + output + the continuation verification reads. ``confidences[B]`` /
    ``entropies[B]`` [n, B - 1] (float32, NaN where not drafted): the drafter's probability / entropy of each
    draft, for the block sizes a sweep recorded them for.
    """

    prompt_length: int
    output_length: int
    candidates: tuple[int, ...]
    accepted: np.ndarray
    sequence: list[int]
    stop_token_ids: tuple[int, ...]
    budget: int
    confidences: dict[int, np.ndarray] = field(default_factory=dict)
    entropies: dict[int, np.ndarray] = field(default_factory=dict)
    rounds: bool = False
    """True: every reachable anchor is one recorded round (a calibration bank, an engine's steps), each
    replayed on its own: after a cycle the next is the recording's next round (:meth:`cycle`)"""
    _fixed: dict[int, tuple[CycleRecord, ...]] = field(default_factory=dict, init=False, repr=False,
                                                       compare=False)
    """the cycles of each fixed block size, replayed once (the table is read-only once built)"""
    _rows: dict[Action, tuple[list[int], list[int], list[bool], list[CycleRecord | None]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    """by (B, L): accepted drafts, tokens kept, whether the decode ends and the cycle's record (built once),
    at every anchor (one :meth:`_outcomes` pass per cycle shape; a cycle is then lookups)"""
    _frame: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False,
                                                                     compare=False)
    """:meth:`_commit_frame`, computed once"""
    _whole: Outcomes | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`_outcomes` of whole blocks of B = 1 and every candidate, computed once"""
    _rounds: dict[int, int | None] | None = field(default=None, init=False, repr=False, compare=False)
    """each recorded round's offset -> the next one's (``None``: the last; a table of :attr:`rounds`)"""
    _priced: tuple[CostTable | None, dict] = field(default_factory=lambda: (None, {}), init=False, repr=False,
                                                   compare=False)
    """(the cost table last priced with, its fixed seconds by candidate set): evaluation and oracles"""

    def drafted_block(self, position: int, block_size: int) -> DraftedBlock:
        """The block a live ``draft(block_size)`` returns at ``position``: confidences, entropies [B - 1]."""
        entropies = self._block_row(self.entropies, "entropies", position,
                                    block_size) if self.entropies else []
        confidences = self._block_row(self.confidences, "confidences", position, block_size)
        return DraftedBlock(block_size, tuple(confidences), tuple(entropies))

    def _block_row(self, rows: dict[int, np.ndarray], what: str, position: int,
                   block_size: int) -> list[float]:
        if block_size == 1:
            return []
        if block_size not in rows:
            raise ValueError(f"this replay recorded the drafter's {what} for block sizes {sorted(rows)}, "
                             f"not {block_size}; sweep again with --confidences including {block_size}")
        row = rows[block_size][position - self.prompt_length]
        if np.isnan(row).any():
            raise ValueError(f"anchor {position} was not replayed with {what} at B = {block_size}")
        return row.tolist()

    def checked_size(self, block_size: object) -> int:
        """``block_size`` as an int where a cycle may have it (a candidate, or 1), else a ValueError."""
        if type(block_size) is int and block_size in self.candidates:  # the common case, checked already
            return block_size
        size = check_block_size(block_size)
        if size != 1:  # plain decoding: replayed by every table (:meth:`cycle`)
            self._column(size)
        return size

    def _column(self, block_size: int) -> int:
        if block_size not in self.candidates:
            raise ValueError(f"block size {block_size} is not among this replay's candidates "
                             f"{list(self.candidates)}")
        return self.candidates.index(block_size)

    def initial_state(self, prefill_logits: Any = None) -> DecodeState:
        """The state after prefill, what per-cycle policies read first (``prefill_logits`` [V] or empty)."""
        logits = np.zeros(0, dtype=np.float32) if prefill_logits is None else prefill_logits
        return DecodeState.after_prefill(logits, self.prompt_length)

    def start(self) -> tuple[int, int, bool]:
        """(anchor position, tokens produced, done) before the first cycle."""
        p = self.prompt_length
        done = self.sequence[p] in set(self.stop_token_ids) or min(self.budget, self.output_length) <= 1
        return p, 1, done

    def cycle(self, position: int, produced: int, size: int, length: int | None = None
              ) -> tuple[CycleRecord, int, int, bool]:
        """One cycle of block size ``size`` verifying ``length`` tokens (default: all) at anchor ``position``
        with ``produced`` tokens output (the prefill's token, then one per anchor passed: ``position -
        prompt_length + 1``): (cycle, next position, produced, done); L of B accepts min(B's, L - 1)."""
        length = size if length is None else min(length, size)
        rows = self._rows.get((size, length))
        if rows is None:
            # plain decoding (B = 1) drafts nothing, so every table replays it, recorded column or not
            outcomes = self._outcomes([size], [length])
            rows = self._rows[size, length] = (outcomes.accepted[:, 0].tolist(), outcomes.kept[:, 0].tolist(),
                                               outcomes.done[:, 0].tolist(), [None] * len(outcomes.done))
        i = position - self.prompt_length
        accepted, kept, cycle = rows[0][i], rows[1][i], rows[3][i]
        if cycle is None:
            if accepted < 0:
                raise ValueError(f"anchor {position} was not replayed: no schedule of {list(self.candidates)}"
                                 " reaches it (schedules with verify lengths need a sweep with "
                                 "--verify-lengths)")
            cycle = rows[3][i] = CycleRecord(size, accepted, kept, verified=length if length < size else 0)
        if self.rounds:  # a cut round commits less, and the next round is the recording's
            following = self._following_round(i)
            if following is not None and not rows[2][i]:
                return cycle, self.prompt_length + following, following + 1, False
            return cycle, position + accepted + 1, produced + kept, True
        return cycle, position + accepted + 1, produced + kept, rows[2][i]

    def _following_round(self, offset: int) -> int | None:
        """The offset of the recorded round after the one at ``offset`` (``None``: it was the last)."""
        if self._rounds is None:
            offsets = np.flatnonzero(self.accepted[:, 0] >= 0).tolist()
            self._rounds = dict(zip(offsets, [*offsets[1:], None]))
        return self._rounds[offset]

    def session(self, prefill_logits: Any = None) -> ReplaySession:
        """The replayed decode as a :class:`~specpolicy.cycles.CycleSource` (one cycle per step)."""
        return ReplaySession(self, prefill_logits)

    def simulate(self, plan: Plan | int, prefill_logits: Any = None) -> list[CycleRecord]:
        """Cycles ``plan`` (or a fixed size) runs, as live decoding; ``prefill_logits`` [V]: what it reads."""
        size = plan.always if isinstance(plan, Plan) else check_block_size(plan)
        if size is None:
            return run(self.session(prefill_logits), plan)
        if size not in self._fixed:
            self._column(size)
            self._fixed[size] = self._walk_fixed(size) or tuple(run(self.session(), Plan.fixed(size)))
        return list(self._fixed[size])

    def _walk_fixed(self, size: int) -> tuple[CycleRecord, ...] | None:
        """The cycles of a fixed ``size`` over :meth:`_outcomes` (a session's run, without one); ``None``
        where a session must run: recorded rounds, or an anchor reached with no replayed cycle."""
        if self.rounds:
            return None
        accepted, kept, nxt, done = (part[:, 0].tolist() for part in self._outcomes([size]))
        anchors = self._anchors(accepted, nxt, done)
        if anchors is None:
            return None
        return tuple(CycleRecord(size, accepted[i], kept[i]) for i in anchors if kept[i])

    def _anchors(self, accepted: list[int], nxt: list[int], done: list[bool]) -> list[int] | None:
        """The anchors a fixed block runs a cycle at (its :class:`Outcomes` columns), in order (``None``: one
        not replayed)."""
        anchors, i, finished = [], 0, self.start()[2]
        while not finished:
            if accepted[i] < 0:
                return None
            anchors.append(i)
            finished, i = done[i], nxt[i]
        return anchors

    def taus(self) -> dict[int, float]:
        """tau of every candidate as a fixed block size (:func:`~specpolicy.state.mean_acceptance` of the
        cycles :meth:`simulate` runs: each schedule commits :meth:`tokens` in its :meth:`fixed_cycles`)."""
        cycles = self.fixed_cycles(self.candidates)
        return {b: self.tokens() / n if n else 0.0 for b, n in zip(self.candidates, cycles)}

    def tokens(self) -> int:
        """Tokens every schedule commits after prefill (lossless: the same output whatever the sizes)."""
        return max(0, min(self.budget, self.output_length) - 1)

    def fixed_seconds(self, costs: CostTable, candidates: Sequence[int] | None = None) -> dict[int, float]:
        """Modelled decode seconds of each of ``candidates`` (default: every one) as a fixed block size
        (:meth:`CostTable.seconds` of its cycles); the table needs entries for these only."""
        sizes = self.candidates if candidates is None else check_candidate_set(candidates)
        check_type(costs, CostTable, "costs", "CostTable.load(path)")
        if self._priced[0] is not costs:
            self._priced = (costs, {})
        if sizes not in self._priced[1]:
            self._priced[1][sizes] = {b: n * costs.fixed_cycle_seconds(b)
                                      for b, n in zip(sizes, self.fixed_cycles(sizes))}
        return dict(self._priced[1][sizes])

    def fixed_cycles(self, sizes: Sequence[int]) -> list[int]:
        """Cycles of each of ``sizes`` as a fixed block size, as :meth:`simulate` counts them, walked over
        :meth:`_outcomes` without building the cycles (runs imported at several blocks: each its own)."""
        outcomes = self._outcomes(sizes)
        walks = [self._anchors(*columns) for columns in zip(*(a.T.tolist() for a in (
            outcomes.accepted, outcomes.nxt, outcomes.done)))]
        if None in walks:
            self._outcomes(sizes, check=True)  # raises, naming the anchor a walk reaches unreplayed
        return [len(walk) for walk in walks]

    def fastest_fixed(self, costs: CostTable, candidates: Sequence[int] | None = None,
                      training_block_size: int = TRAINING_BLOCK_SIZE) -> int:
        """The per-prompt time oracle: fewest modelled seconds as a fixed block (ties: nearest training B)."""
        sizes = tuple(self.candidates if candidates is None else candidates)
        seconds = self.fixed_seconds(costs, sizes)
        return sizes[oracle_label([-seconds[b] for b in sizes], sizes, training_block_size)]
