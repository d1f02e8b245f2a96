"""The table exact replay reads: every candidate's accepted drafts at every reachable anchor, built from one
live decode (or imported) and read without torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from specpolicy.arguments import check_block_size, check_candidate_set, check_type
from specpolicy.costs import CostTable
from specpolicy.cycles import (
    AnchorActions,
    CycleRecord,
    DraftedBlock,
    Plan,
    run,
)
from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.policy import oracle_label
from specpolicy.state import DecodeState, commit_length

if TYPE_CHECKING:
    from specpolicy.replay.session import ReplaySession

Action = tuple[int, int]
"""(block size B, verify length L) of one cycle"""


class Outcomes(NamedTuple):
    """What one cycle shape does at every anchor of a table, [n, A] each (A shapes)."""

    accepted: np.ndarray
    """drafts accepted (within the verify length; -1: the anchor was not replayed)"""
    kept: np.ndarray
    """tokens the cycle commits (cut at a stop token or the budget)"""
    nxt: np.ndarray
    """the next anchor's offset (at most n)"""
    done: np.ndarray
    """whether the decode ends with this cycle"""


@dataclass
class ReplayTable:
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
    _rounds: dict[int, int | None] | None = field(default=None, init=False, repr=False, compare=False)
    """each recorded round's offset -> the next one's (``None``: the last; a table of :attr:`rounds`)"""
    _priced: tuple[CostTable | None, dict] = field(default_factory=lambda: (None, {}), init=False, repr=False,
                                                   compare=False)
    """(the cost table last priced with, its fixed seconds by candidate set): evaluation and oracles ask
    alike"""

    def drafted_block(self, position: int, block_size: int) -> DraftedBlock:
        """The block a live ``draft(block_size)`` returns at ``position``: the drafter's confidences [B - 1]
        and entropies [B - 1] as recorded."""
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
        """``block_size`` as an int when a cycle here may have it (a candidate, or 1), else a ValueError
        naming it."""
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
        """The decode's state after prefill, what per-cycle policies read first (``prefill_logits`` [V];
        default: empty)."""
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
        prompt_length + 1``): (cycle, next position, produced, done). Verifying L of B accepts min(accepted at
        B, L - 1)."""
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
        from specpolicy.replay.session import ReplaySession

        return ReplaySession(self, prefill_logits)

    def simulate(self, plan: Plan | int, prefill_logits: Any = None) -> list[CycleRecord]:
        """Cycles ``plan`` (or a fixed block size) would run, exactly as live decoding;
        ``prefill_logits`` [V] is what per-cycle policies read (default: empty)."""
        size = plan.always if isinstance(plan, Plan) else check_block_size(plan)
        if size is None and (plan.length is None or (isinstance(plan.block, AnchorActions) and
                             plan.length == plan.block.length)):
            return self._walk(plan.block, prefill_logits)
        if size is None:
            return run(self.session(prefill_logits), plan)
        if size not in self._fixed:
            self._column(size)
            self._fixed[size] = self._walk_fixed(size) or tuple(run(self.session(), Plan.fixed(size)))
        return list(self._fixed[size])

    def _walk(self, rule: Callable[[DecodeState], int] | AnchorActions, prefill_logits: Any = None
              ) -> list[CycleRecord]:
        """The cycles of a whole-block rule, or a plan by anchor (its (B, L) read at each anchor, no state
        kept), :meth:`cycle` after :meth:`cycle`: what a session runs for it, without one."""
        anchors = rule if isinstance(rule, AnchorActions) else None
        state = None if anchors else self.initial_state(prefill_logits)
        cycles, (position, produced, done) = [], self.start()
        while not done:
            size, length = anchors.at(position) if anchors else (self.checked_size(rule(state)), None)
            cycle, position, produced, done = self.cycle(position, produced, size, length)
            if cycle.committed:
                cycles.append(cycle)
            if state is not None:
                state.advance(cycle, produced)
        return cycles

    def _walk_fixed(self, size: int) -> tuple[CycleRecord, ...] | None:
        """The cycles of a fixed ``size`` over :meth:`_outcomes` (what a session runs, without one); ``None``
        where the session must run: recorded rounds, or an anchor the walk reaches without a replayed cycle
        (the session names it)."""
        if self.rounds:
            return None
        outcomes = self._outcomes([size])
        anchors = self._anchors(outcomes, 0)
        if anchors is None:
            return None
        accepted, kept = outcomes.accepted[:, 0].tolist(), outcomes.kept[:, 0].tolist()
        return tuple(CycleRecord(size, accepted[i], kept[i]) for i in anchors if kept[i])

    def _anchors(self, outcomes: Outcomes, column: int) -> list[int] | None:
        """The anchors a fixed block size (``column`` of ``outcomes``) runs a cycle at, in order (``None``:
        the walk reaches one without a replayed cycle)."""
        columns = (outcomes.accepted, outcomes.nxt, outcomes.done)
        accepted, nxt, done = (a[:, column].tolist() for a in columns)
        anchors, i, finished = [], 0, self.start()[2]
        while not finished:
            if accepted[i] < 0:
                return None
            anchors.append(i)
            finished, i = done[i], nxt[i]
        return anchors

    def taus(self) -> dict[int, float]:
        """tau of every candidate as a fixed block size (:func:`~specpolicy.cycles.mean_acceptance` of the
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
        :meth:`_outcomes` without building the cycles."""
        outcomes = self._outcomes(sizes, check=True)  # checked: every anchor a walk reaches was replayed
        return [len(self._anchors(outcomes, j)) for j in range(len(sizes))]

    def fastest_fixed(self, costs: CostTable, candidates: Sequence[int] | None = None,
                      training_block_size: int = TRAINING_BLOCK_SIZE) -> int:
        """The per-prompt time oracle: the candidate with the fewest modelled seconds as a fixed block size
        (ties: nearest ``training_block_size``, then the smaller)."""
        sizes = tuple(self.candidates if candidates is None else candidates)
        seconds = self.fixed_seconds(costs, sizes)
        return sizes[oracle_label([-seconds[b] for b in sizes], sizes, training_block_size)]

    def cost_to_go(self, costs: CostTable | None = None, candidates: Sequence[int] | None = None,
                   training_block_size: int = TRAINING_BLOCK_SIZE, verify_lengths: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, list[Action]]:
        """Exact dynamic programming over anchors: the fewest modelled seconds to finish from each, over B (or
        with ``verify_lengths`` every (B, L <= B)), with :meth:`cycle`'s commit rule; without ``costs``, the
        fewest cycles.

        Returns value [n] (inf: unreachable), q [n, A] and the actions (B, L) in order of preference (ties
        go first: B nearest ``training_block_size``, or with verify lengths the cheaper cycle, then smaller).
        """
        sizes = sorted(self.candidates if candidates is None else check_candidate_set(candidates),
                       key=lambda b: (abs(b - training_block_size), b))
        actions = [(b, length) for b in sizes for length in (range(1, b + 1) if verify_lengths else (b,))]
        price = {a: costs.split_cycle_seconds(*a) if costs is not None else 1.0 for a in actions}
        if verify_lengths:
            actions.sort(key=lambda a: (price[a], a))
        outcomes = self._outcomes([b for b, _ in actions], [length for _, length in actions], check=True)
        n, prices = self.accepted.shape[0], [price[a] for a in actions]
        nxt = np.where(outcomes.done, n + 1, outcomes.nxt).tolist()  # a finished cycle adds value[n + 1] = 0
        value, rows = [np.inf] * (n + 1) + [0.0], [[np.inf] * len(actions)] * n
        for i in np.flatnonzero(self.accepted[:, 0] >= 0)[::-1].tolist():  # backwards, reachable anchors
            rows[i] = [cost + value[j] for cost, j in zip(prices, nxt[i])]  # a row of small lists: Python
            value[i] = min(rows[i])
        return np.array(value[:n]), np.array(rows, dtype=float).reshape(n, len(actions)), actions

    def _outcomes(self, sizes: Sequence[int], lengths: Sequence[int] | None = None, check: bool = False
                  ) -> Outcomes:
        """What a cycle of each of ``sizes`` verifying ``lengths`` does at every anchor, [n, A] each:
        :func:`commit_length` over arrays. ``check``: first refuse a size that some reachable anchor lacks
        (a schedule would reach it)."""
        p, n = self.prompt_length, self.accepted.shape[0]
        accepted = np.stack([np.zeros(n, np.int64) if b == 1 else self.accepted[:, self._column(b)]
                             for b in sizes], axis=1).astype(np.int64)
        reachable = self.accepted[:, 0] >= 0
        if check and (accepted[reachable] < 0).any():
            i, j = np.argwhere((accepted < 0) & reachable[:, None])[0]
            self.cycle(p + int(i), int(i) + 1, sizes[j])  # raises: names the anchor
        if lengths is not None:
            accepted = np.minimum(accepted, np.asarray(lengths, dtype=np.int64) - 1)  # -1 stays -1
        if self._frame is None:
            self._frame = self._commit_frame()
        available, first_stop, room = self._frame
        kept, reason = commit_length(np.minimum(accepted + 1, available), first_stop, room)
        return Outcomes(accepted, kept, np.minimum(np.arange(n)[:, None] + accepted + 1, n), reason != 0)

    def _commit_frame(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the commit rule reads of the text at every anchor, [n, 1] each: tokens left in the sequence
        after it, the offset of the first stop token among them, and the budget's room."""
        sequence, n = np.asarray(self.sequence), self.accepted.shape[0]
        stop = np.where(np.isin(sequence, self.stop_token_ids), np.arange(len(sequence)), len(sequence))
        next_stop = np.append(np.minimum.accumulate(stop[::-1])[::-1], len(sequence))  # [len + 1]
        first = self.prompt_length + np.arange(n) + 1  # the first committed token's index, per anchor
        room = min(self.budget, self.output_length) - np.arange(n) - 1
        first_stop = next_stop[np.minimum(first, len(sequence))] - first
        return (len(sequence) - first)[:, None], first_stop[:, None], room[:, None]

    def oracle_plan(self, costs: CostTable | None = None, candidates: Sequence[int] | None = None,
                    training_block_size: int = TRAINING_BLOCK_SIZE, verify_lengths: bool = False) -> Plan:
        """The :meth:`cost_to_go` optimum as a plan by anchor: an upper bound for any per-cycle policy over
        ``candidates`` (whole blocks, or (B, L) with ``verify_lengths``), or plain decoding where that is
        faster (a decode of plain steps between drafts pays :meth:`CostTable.cycle_seconds` (1) a step, plain
        decoding :attr:`~CostTable.ar_seconds`)."""
        value, q, actions = self.cost_to_go(costs, candidates, training_block_size, verify_lengths)
        sizes = self.candidates if candidates is None else candidates
        if costs is not None and 1 in sizes and len(value) and self.fixed_seconds(costs, [1])[1] < value[0]:
            return Plan.fixed(1)
        best = np.argmin(q, axis=1)  # the first minimum: the preferred action
        reached = np.isfinite(q[np.arange(len(best)), best])
        rule = AnchorActions(self.prompt_length, tuple(actions[j] if ok else (0, 0)
                                                       for j, ok in zip(best.tolist(), reached.tolist())),
                             "was not replayed; the oracle needs a sweep that reaches it (--verify-lengths "
                             "for (B, L) schedules)")
        return Plan(rule, rule.length, reads_block=False) if verify_lengths else Plan(rule)
