"""Metrics: pooled speedups, paired ratios, gain share, per-prompt quantiles, bootstrap intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specpolicy.evaluation.metrics import PolicyResults, PromptResult, paired_interval, speed_ratio, summarize


def results(name: str, tokens: list[int], seconds: list[float], ar: list[float], sizes: int = 16,
            taus: list[float] | None = None) -> PolicyResults:
    taus = taus or [2.0] * len(tokens)
    return PolicyResults(name, "modelled", [PromptResult(f"p{i}", [sizes], t, n, s, a, 16)
                                            for i, (n, s, a, t) in enumerate(zip(tokens, seconds, ar, taus))])


# (tokens, policy seconds, AR seconds) -> pooled speedup = sum AR / sum policy, not the mean of ratios
POOLED_CASES = [
    ([10, 10], [1.0, 1.0], [2.0, 2.0], 2.0),
    ([10, 10], [1.0, 4.0], [2.0, 2.0], 0.8),  # per-prompt ratios 2.0 and 0.5 average 1.25; pooled is 0.8
    ([100, 10], [10.0, 1.0], [10.0, 4.0], 14 / 11),
]


@pytest.mark.parametrize(("tokens", "seconds", "ar", "expected"), POOLED_CASES)
def test_pooled_speedup_is_total_ar_time_over_total_time(tokens, seconds, ar, expected):
    row = summarize([results("p", tokens, seconds, ar)], baseline="none", n_bootstrap=200)[0]
    assert row.speedup == pytest.approx(expected)
    assert row.tokens_per_s == pytest.approx(sum(tokens) / sum(seconds))
    per_prompt = np.array(ar) / np.array(seconds)
    assert row.median_speedup == pytest.approx(np.median(per_prompt))
    assert row.p10_speedup == pytest.approx(np.percentile(per_prompt, 10))


def test_ratio_to_the_baseline_and_share_of_the_oracle_gain():
    rng = np.random.default_rng(0)
    tokens = list(rng.integers(50, 128, 100))
    base = rng.uniform(1.0, 2.0, 100)
    oracle = base / 2  # twice as fast on every prompt
    half = 1 / (0.5 / base + 0.5 / oracle)  # pooled speed halfway between the two
    ar = list(base * 1.1)
    rows = {r.policy: r for r in summarize([
        results("fixed16", tokens, list(base), ar), results("half", tokens, list(base), ar),
        results("oracle", tokens, list(oracle), ar)], n_bootstrap=300)}
    assert rows["oracle"].vs_baseline == pytest.approx(2.0)
    assert rows["oracle"].gain_share == pytest.approx(1.0)
    assert rows["fixed16"].gain_share == pytest.approx(0.0)
    assert rows["half"].vs_baseline == pytest.approx(1.0)
    low, high = rows["oracle"].vs_baseline_ci95
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)  # the same ratio on every resample
    assert np.isfinite(half).all()


def test_paired_interval_covers_the_ratio_and_shrinks_with_pairing():
    rng = np.random.default_rng(1)
    shared = rng.uniform(5, 15, 400)
    a, b = shared * rng.normal(1.05, 0.01, 400), shared
    low, high = paired_interval([a, b], lambda x, y, axis=-1: np.sum(x, axis) / np.sum(y, axis), 500)
    assert low < 1.05 < high and high - low < 0.005  # pairing removes the shared spread


@pytest.mark.parametrize("prompts", [2, 7, 48, 200])
def test_paired_interval_is_scipys_paired_percentile_bootstrap(prompts):
    from scipy import stats

    rng = np.random.default_rng(prompts)
    columns = [rng.uniform(0.1, 10, prompts) for _ in range(4)]
    expected = stats.bootstrap(columns, speed_ratio, paired=True, vectorized=True, n_resamples=999,
                               confidence_level=0.95, method="percentile", random_state=3).confidence_interval
    assert paired_interval(columns, speed_ratio, 999, seed=3) == pytest.approx(tuple(expected), rel=1e-12)


def test_rows_are_json_without_nan_and_fit_a_narrow_table():
    row = summarize([PolicyResults("untimed", "none", [PromptResult("p", [16], 2.0, 0, 0.0, None)])])[0]
    data = row.to_dict()
    json.dumps(data, allow_nan=False)  # NaN would not be JSON
    assert data["speedup"] is None
    assert all(len(str(v)) <= 16 for v in row.table_row().values())


def test_rows_come_in_length_order_for_context_buckets_and_by_name_otherwise():
    from specpolicy.costs import label_order

    labels = ["1024-1535", "qa", ">=1536", "<512", "512-1023", "math"]
    assert sorted(labels, key=label_order) == ["<512", "512-1023", "1024-1535", ">=1536", "math", "qa"]
