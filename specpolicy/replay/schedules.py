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
    """The DP half of :class:`~specpolicy.replay.table.ReplayTable` (its anchors, columns and commit rule)."""

    def cost_to_go(self, costs: CostTable | None = None, candidates: Sequence[int] | None = None,
                   training_block_size: int = TRAINING_BLOCK_SIZE, verify_lengths: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, list[Action]]:
        """Exact dynamic programming over anchors: the fewest modelled seconds (no ``costs``: cycles) to end
        from each, over B (``verify_lengths``: every (B, L <= B)), with :meth:`cycle`'s commit rule. Returns
        value [n] (inf: unreachable), q [n, A] and the actions (B, L) in order of preference (ties go first: B
        nearest ``training_block_size``, or with verify lengths the cheaper cycle, then smaller)."""
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
        :func:`commit_length` over arrays. ``check``: refuse a size a reachable anchor lacks."""
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
        ``candidates`` (whole blocks, or (B, L) with ``verify_lengths``), or plain decoding where faster (its
        steps at :attr:`~CostTable.ar_seconds`, not a drafting engine's)."""
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
        return Plan(rule)  # it brings its L (whole blocks: L = B)
