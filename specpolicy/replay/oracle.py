"""The (B, L) time oracle: exact dynamic programming over a replay with verify lengths (no torch).

Each cycle picks a block size B to draft and a verify length L <= B; verifying L of a block that
would accept ``a`` drafts accepts ``min(a, L - 1)`` (:meth:`ReplayTable.cycle`). The fewest modelled
seconds from each anchor over every such schedule is an upper bound for any (B, L) policy: with
perfect foresight it verifies exactly the drafts that will pass, plus one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.replay.table import ReplayTable

Action = tuple[int, int]
"""(block size B, verify length L)"""


def verify_cost_to_go(table: ReplayTable, costs: CostTable, candidates: Sequence[int] | None = None
                      ) -> tuple[np.ndarray, dict[int, Action]]:
    """value [n] (fewest seconds to finish from anchor i; inf where not replayed) and the best action at
    each replayed anchor (ties: the cheaper cycle, then the smaller B)."""
    sizes = sorted(table.candidates if candidates is None else candidates)
    prices = {(b, v): costs.split_cycle_seconds(b, v) for b in sizes for v in range(1, b + 1)}
    n, p = table.accepted.shape[0], table.prompt_length
    value, best = np.full(n, np.inf), {}
    for i in range(n - 1, -1, -1):
        if table.accepted[i, 0] < 0:
            continue
        options = []
        for b in sizes:
            for length in range(1, b + 1):
                _, nxt, _, done = table.cycle(p + i, i + 1, b, length)
                rest = 0.0 if done else value[nxt - p]
                options.append((prices[b, length] + rest, prices[b, length], b, length))
        total, _, b, length = min(options)
        if np.isfinite(total):
            value[i], best[i] = total, (b, length)
    return value, best


def verify_oracle_plan(table: ReplayTable, costs: CostTable, candidates: Sequence[int] | None = None
                       ) -> dict[int, Action]:
    """Anchor position -> the (B, L) the oracle runs there, along its own path from the first anchor."""
    _, best = verify_cost_to_go(table, costs, candidates)
    p = table.prompt_length
    plan: dict[int, Action] = {}
    position, produced, done = table.start()
    while not done:
        if position - p not in best:
            raise ValueError(f"anchor {position} was not replayed; the (B, L) oracle needs a sweep with "
                             "--verify-lengths")
        plan[position] = best[position - p]
        _, position, produced, done = table.cycle(position, produced, *plan[position])
    return plan
