"""Training sets from a sweep: time and tau labels, candidate subsets, repricing, the split by prompt."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.costs import uniform_costs
from specpolicy.data.splits import validation_ids
from specpolicy.training.data import split_by_prompt, training_set


def test_tau_and_time_labels(replay_store):
    taus = training_set(replay_store, "tau")
    assert taus.logits.shape[0] == 8 and taus.taus.shape == (8, len(replay_store.candidates))
    for row, label in zip(taus.taus, taus.labels):
        assert row[label] == row.max()
    time = training_set(replay_store, "time")
    costs = replay_store.latency()
    for table, values, label in zip(time.episodes, time.values, time.labels):
        seconds = table.fixed_seconds(costs)
        fastest = min(seconds.values())
        assert seconds[time.candidates[label]] == fastest
        assert values[label] == pytest.approx(-fastest / (table.tokens() * costs.ar_seconds))


def test_candidate_subset_and_repricing(replay_store):
    subset = training_set(replay_store, "time", candidates=[4, 16])
    assert subset.candidates == (4, 16) and subset.values.shape == (8, 2)
    flat = training_set(replay_store, "time", costs=uniform_costs(replay_store.candidates))
    # with every cycle priced alike, the fastest block size is the one with the fewest cycles
    for table, label in zip(flat.episodes, flat.labels):
        cycles = {b: len(table.simulate(b)) for b in flat.candidates}
        assert cycles[flat.candidates[label]] == min(cycles.values())
    with pytest.raises(ValueError, match="not in the sweep"):
        training_set(replay_store, "time", candidates=[3])


def test_split_by_prompt_is_disjoint_and_complete(replay_store):
    data = training_set(replay_store, "tau")
    held = validation_ids([r.split_key for r in replay_store.records()], 0.5, seed=0)
    train, validation = split_by_prompt(data, held)
    assert set(validation.prompt_ids) == held
    assert not set(train.prompt_ids) & set(validation.prompt_ids)
    assert len(train) + len(validation) == 8
    assert np.all(train.values == data.values[[data.prompt_ids.index(p) for p in train.prompt_ids]])


def test_a_candidate_string_is_refused_not_read_letter_by_letter(replay_store):
    """Reproduced: training_set(store, "time", "4,8") said "block sizes [',', '4', '8'] are not in the
    sweep's"."""
    with pytest.raises(ValueError, match=r"candidates must be a list of block sizes such as \[4, 8, 16\]"):
        training_set(replay_store, "time", "4,8")
