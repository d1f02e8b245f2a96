"""The one exact dynamic programme over a replay table's anchors (numpy): what every cycle shape does at every
anchor, the fewest modelled seconds (or cycles) to finish from each, and the optimum as a plan by anchor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from specpolicy.arguments import check_candidate_set
from specpolicy.costs import CostTable
from specpolicy.cycles import AnchorActions, Plan
from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.state import commit_length

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


class ExactSchedules:
    """What a cycle does at every anchor of a :class:`~specpolicy.replay.table.ReplayTable`: what the one
    dynamic programme (:func:`cost_to_go`) and lockstep replay read."""

    def _outcomes(self, sizes: Sequence[int], lengths: Sequence[int] | None = None, check: bool = False
                  ) -> Outcomes:
        """What a cycle of each of ``sizes`` verifying ``lengths`` does at every anchor, [n, A] each:
        :func:`commit_length` over arrays (whole blocks: columns of every candidate's, computed once).
        ``check``: refuse a size a reachable anchor lacks."""
        if lengths is None or all(length >= b for b, length in zip(sizes, lengths)):  # whole blocks
            if self._whole is None:
                self._whole = self._committed((1, *self.candidates))
            columns = [0 if b == 1 else 1 + self._column(b) for b in sizes]
            outcomes = Outcomes(*(part[:, columns] for part in self._whole))
        else:
            outcomes = self._committed(sizes, lengths)
        reachable = self.accepted[:, 0] >= 0
        if check and (outcomes.accepted[reachable] < 0).any():
            i, j = np.argwhere((outcomes.accepted < 0) & reachable[:, None])[0]
            self.cycle(self.prompt_length + int(i), int(i) + 1, sizes[j])  # raises: names the anchor
        return outcomes

    def _committed(self, sizes: Sequence[int], lengths: Sequence[int] | None = None) -> Outcomes:
        """:meth:`_outcomes`, computed."""
        n = self.accepted.shape[0]
        accepted = np.stack([np.zeros(n, np.int64) if b == 1 else self.accepted[:, self._column(b)]
                             for b in sizes], axis=1).astype(np.int64)
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


def padded_outcomes(tables: Sequence[ExactSchedules], shapes: Sequence[Action], check: bool = False
                    ) -> tuple[np.ndarray, ...]:
    """Every table's outcomes of cycles of ``shapes`` (B, L), [P, n + 1, K] each (accepted, kept, next anchor,
    done), padded past each table's anchors with rows that end a decode unreplayed; and whether each anchor
    was replayed [P, n + 1]. ``check``: refuse a shape a replayed anchor lacks."""
    outcomes = [t._outcomes(*zip(*shapes), check=check) for t in tables]
    n = max(o.accepted.shape[0] for o in outcomes) + 1
    out = [*(np.full((len(tables), n, len(shapes)), fill) for fill in (-1, 0, n - 1, True)),
           np.zeros((len(tables), n), dtype=bool)]
    for p, (o, table) in enumerate(zip(outcomes, tables)):
        for array, part in zip(out, (*o, table.accepted[:, 0] >= 0)):
            array[p, :len(part)] = part
    return tuple(out)


def cost_to_go(tables: Sequence[ExactSchedules], costs: CostTable | None, candidates: Sequence[int],
               training_block_size: int = TRAINING_BLOCK_SIZE, verify_lengths: bool = False
               ) -> tuple[np.ndarray, np.ndarray, list[Action]]:
    """Exact dynamic programming over every table's anchors at once: the fewest modelled seconds (no
    ``costs``: cycles) to end from each, over B (``verify_lengths``: every (B, L <= B)), with the tables'
    commit rule. Returns value [P, n] (inf: unreachable), q [P, n, A] (n: the longest table's anchors) and the
    actions (B, L) in order of preference (ties go first: B nearest ``training_block_size``, or with verify
    lengths the cheaper cycle, then smaller)."""
    sizes = sorted(check_candidate_set(candidates), key=lambda b: (abs(b - training_block_size), b))
    actions = [(b, length) for b in sizes for length in (range(1, b + 1) if verify_lengths else (b,))]
    price = {a: costs.split_cycle_seconds(*a) if costs is not None else 1.0 for a in actions}
    if verify_lengths:
        actions.sort(key=lambda a: (price[a], a))
    _, _, nxt, done, replayed = padded_outcomes(tables, actions, check=True)
    tables, n = len(tables), nxt.shape[1] - 1
    # value [P, n + 2], flat: n (past a table's end, unreplayed) inf, n + 1 (a finished cycle's) 0
    value = np.full((tables, n + 2), np.inf)
    value[:, n + 1] = 0.0
    following = np.where(done, n + 1, nxt)[:, :n] + (n + 2) * np.arange(tables)[:, None, None]
    q = np.where(replayed[:, :n, None], np.array([price[a] for a in actions]), np.inf)  # [P, n, A]
    flat = value.reshape(-1)
    for i in range(n - 1, -1, -1):  # backwards: every table's anchor i at once
        q[:, i] += flat[following[:, i]]
        value[:, i] = q[:, i].min(axis=1)
    return value[:, :n], q, actions


def oracle_plans(tables: Sequence[ExactSchedules], costs: CostTable | None, candidates: Sequence[int],
                 training_block_size: int = TRAINING_BLOCK_SIZE, verify_lengths: bool = False) -> list[Plan]:
    """The :func:`cost_to_go` optimum of every table as a plan by anchor: an upper bound for any per-cycle
    policy over ``candidates`` (whole blocks, or (B, L) with ``verify_lengths``), or plain decoding where
    faster (its steps at :attr:`~CostTable.ar_seconds`, not a drafting engine's)."""
    value, q, actions = cost_to_go(tables, costs, candidates, training_block_size, verify_lengths)
    plans = []
    starts = value[:, 0] if value.shape[1] else np.full(len(tables), -np.inf)  # no anchor: nothing to run
    for table, start, row in zip(tables, starts.tolist(), q):
        if costs is not None and 1 in candidates and table.fixed_seconds(costs, [1])[1] < start:
            plans.append(Plan.fixed(1))
            continue
        best = np.argmin(row[:table.accepted.shape[0]], axis=1)  # the first minimum: the preferred action
        reached = np.isfinite(row[np.arange(len(best)), best]).tolist()
        plans.append(Plan(AnchorActions(table.prompt_length, tuple(
            actions[j] if ok else (0, 0) for j, ok in zip(best.tolist(), reached)),
            "was not replayed; the oracle needs a sweep that reaches it (--verify-lengths for (B, L) "
            "schedules)")))  # it brings its L (whole blocks: L = B)
    return plans
