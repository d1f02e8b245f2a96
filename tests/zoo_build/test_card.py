"""The model card measures the shipped zoo end to end and renders every section."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specpolicy.replay.table import ReplayTable
from specpolicy.sweep.records import ReplayEntry, SweepRecord
from zoo_build import card


def store_of(outputs: list[list[int]]):
    records = [SweepRecord(prompt_id=f"p{i}", index=i, prompt_length=2, taus={16: 1.0},
                           replay=ReplayEntry.from_table(
        ReplayTable(2, len(out), (16,), np.zeros((len(out), 1), dtype=np.int16), [0, 0, *out], (), 64)))
        for i, out in enumerate(outputs)]
    return SimpleNamespace(records=lambda: iter(records))


def test_distinct_ngram_share_separates_loops_from_varied_text():
    assert card.distinct_ngram_share(store_of([list(range(40))])) == 1.0
    looped = card.distinct_ngram_share(store_of([[7, 8, 9] * 13]))
    assert looped < 0.1


@pytest.mark.slow
def test_card_measures_and_renders_the_shipped_zoo(tmp_path):
    result = card.measure(tmp_path, prompts=2, max_new_tokens=12, bench_prompts=1)
    assert set(result["tau"]) == {"sharegpt T=0", "sharegpt T=1", "humaneval T=0", "humaneval T=1"}
    assert all(set(row) == set(card.CARD_CANDIDATES) for row in result["tau"].values())
    assert result["speed"]["sharegpt T=0"]["prompts with speculative output == AR output"] == "1/1"
    assert result["shipped_val_loss"] < 4.0  # a trained target; uniform guessing over 4,096 ids gives 8.3
    text = card.render(result)
    for heading in ("## Samples", "## tau per block size", "## Per-prompt best block size",
                    "## Output diversity",
                    "## Speed on this CPU"):
        assert heading in text
    assert "validation loss of the shipped target weights" in text
    assert text.count("(greedy)") == len(card.SAMPLE_PROMPTS) and "(T=1, seed 0)" in text
