"""Metrics: summary rows, gap closed, paired bootstrap intervals, training labels."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.evaluate import PolicyResults, PromptResult, bootstrap_interval, summarize
from specpolicy.training_data import split_by_prompt, training_set


def results(name: str, taus: list[float], chosen: int, oracle: list[int]) -> PolicyResults:
    return PolicyResults(name, "modelled", [PromptResult(f"p{i}", [chosen], t, 10, 1.0, 0.5, o)
                                            for i, (t, o) in enumerate(zip(taus, oracle))])


def test_gap_closed_and_agreement():
    rng = np.random.default_rng(0)
    base = rng.uniform(3, 5, 200)
    best = base + rng.uniform(0.2, 0.6, 200)
    labels = [16] * 200
    rows = {r["policy"]: r for r in summarize([
        results("fixed16", list(base), 16, labels),
        results("half", list((base + best) / 2), 15, labels),
        results("oracle", list(best), 16, labels),
    ], n_bootstrap=300)}
    assert rows["half"]["gap_closed"] == pytest.approx(0.5, abs=1e-3)
    low, high = (float(x) for x in rows["half"]["gap_closed_ci95"].strip("[]").split(","))
    assert low <= 0.5 <= high
    assert rows["oracle"]["gap_closed"] == pytest.approx(1.0)
    assert rows["half"]["oracle_agreement"] == 0.0 and rows["fixed16"]["oracle_agreement"] == 1.0
    assert rows["fixed16"]["speedup"] == pytest.approx(5.0)  # AR 0.5 s/token vs 1 s / 10 tokens


def test_bootstrap_interval_covers_the_mean():
    values = np.random.default_rng(1).normal(2.0, 1.0, size=(500, 1))
    low, high = bootstrap_interval(values, lambda v: v[:, 0].mean(), n=500)
    assert low < 2.0 < high and high - low < 0.3


def test_training_set_labels_and_split(replay_store):
    data = training_set(replay_store, "tau")
    assert data.logits.shape == (8, 300) and data.taus.shape == (8, 5)
    for row, label in zip(data.taus, data.labels):
        assert row[label] == row.max()
    fast = training_set(replay_store, "tokens_per_second")
    assert fast.labels.shape == (8,)
    train, validation = split_by_prompt(data, 0.5, seed=0)
    assert not set(train.prompt_ids) & set(validation.prompt_ids)
    assert len(train) + len(validation) == 8
