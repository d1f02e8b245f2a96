"""The one cost-table rule on live paths: a flagged table warns, and what is cached is what the message
says."""

from __future__ import annotations

from dataclasses import replace

from specpolicy.costs import uniform_costs
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.sweep import latency


def _cached(trained_pair, tmp_path, monkeypatch, flagged: bool) -> list[str]:
    """What ``cached_costs`` reports when the measurement comes out ``flagged`` (noisy) or clean."""
    table = uniform_costs([1, 4, 8], ar_seconds=0.01, per_token=0.1)
    table = replace(table, spread={4: 0.9}) if flagged else table
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path))
    monkeypatch.setattr(latency, "measure_costs",
                        lambda decoder, sizes: replace(table, warnings=tuple(table.check())))
    heard: list[str] = []
    latency.cached_costs(SpeculativeDecoder(*trained_pair), [4, 8], {"m": 1}, heard.append)
    return heard


def test_a_flagged_table_warns_and_is_not_said_to_be_cached(trained_pair, tmp_path, monkeypatch):
    """Reproduced first: it printed 'cached in FILE' before measuring, then never wrote the flagged table."""
    text = "\n".join(_cached(trained_pair, tmp_path, monkeypatch, flagged=True))
    assert "flagged (noisy" in text and "not cached" in text and "cached in" not in text
    assert not list(tmp_path.rglob("*.json"))


def test_a_clean_table_is_cached_where_the_message_says(trained_pair, tmp_path, monkeypatch):
    cached = _cached(trained_pair, tmp_path, monkeypatch,
                     flagged=False)[-1].removeprefix("cost table cached in ")
    assert [str(p) for p in tmp_path.rglob("*.json")] == [cached]
    reread = latency.cached_costs(SpeculativeDecoder(*trained_pair), [4, 8], {"m": 1})
    assert reread.ar_seconds == 0.01  # read back, not measured again


def test_batch_costs_time_every_batch_and_length_with_the_passes_the_cost_table_times(trained_pair):
    """One pass builder serves both tables (``latency.passes``); at batch 2 its caches crop back, so every
    repeat times the same pass."""
    from specpolicy.sweep.batch_latency import measure_batch_costs

    decoder = SpeculativeDecoder(*trained_pair)
    table = measure_batch_costs(decoder, [1, 2], [1, 4], context_length=16, repeats=3)
    assert table.batch_sizes == (1, 2)
    assert {b: sorted(row) for b, row in table.verify.items()} == {1: [1, 4], 2: [1, 4]}
    assert {b: sorted(row) for b, row in table.draft.items()} == {1: [4], 2: [4]}
    assert all(s > 0 for row in [*table.verify.values(), *table.draft.values()] for s in row.values())


def test_a_context_past_the_targets_positions_is_refused_before_any_pass(trained_pair):
    """Reproduced (issue 75, #8): `bench latency --context 5000` on a 2,048-position target measured a table
    (RoPE past its positions) instead of refusing."""
    import pytest

    from specpolicy.sweep.batch_latency import measure_batch_costs

    decoder = SpeculativeDecoder(*trained_pair)
    room = decoder.max_positions - 16
    for measure in (lambda: latency.measure_costs(decoder, [1, 16], context_length=room + 1),
                    lambda: measure_batch_costs(decoder, [1], [16], context_length=room + 1, repeats=3)):
        with pytest.raises(ValueError, match=f"pass --context {room} or less"):
            measure()
