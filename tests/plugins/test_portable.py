"""Portable learned policies: they predict cycles per token (machine-free) and price them with the cost
table of the machine they run on; sweeps re-price with any table that covers the evaluated sizes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.costs import CostTable, uniform_costs
from specpolicy.envs.replay_data import shipped_sweep
from specpolicy.training_data import training_set

EVALUATED = (1, 2, 4, 8, 12, 16, 20, 24, 32)


def without(costs: CostTable, sizes: set[int]) -> CostTable:
    """``costs`` with no entry for ``sizes``."""
    data = costs.to_json()
    for key in ("draft_seconds", "verify_seconds", "spread"):
        data[key] = {b: s for b, s in data[key].items() if int(b) not in sizes}
    return CostTable.from_json(data)


def test_a_table_lacking_sizes_outside_the_candidates_reprices_the_shipped_sweep():
    """Reported: re-pricing with a table without 14..18 failed even with --candidates excluding them."""
    store = shipped_sweep("validation")
    costs = without(store.latency(), {14, 15, 17, 18})
    record = next(store.records())
    assert record.table().fastest_fixed(costs, EVALUATED) in EVALUATED
    data = training_set(store, "time", EVALUATED, costs)
    assert data.values.shape == (len(data), len(EVALUATED))
