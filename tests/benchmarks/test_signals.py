"""``python -m benchmarks signals``: suffix matches as an n-gram drafter reads them, and gates bounded by the
oracle."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchmarks.__main__ import app
from benchmarks.signals import Gate, speed, suffix_matches, target_confidences
from specpolicy.costs import CostTable
from specpolicy.sweep.store import SweepStore


def test_a_suffix_match_is_the_longest_run_of_the_text_so_far_that_ended_earlier():
    text = [5, 1, 2, 3, 9, 1, 2, 3, 4, 1, 2]
    # anchors 4..10: 9 is new; "1", "1 2", "1 2 3" repeat; 4 is new; "1", "1 2" repeat again
    assert suffix_matches(text, 4, 11) == [0, 1, 2, 3, 0, 1, 2]
    assert suffix_matches(text, 7, 8, longest=2) == [2]


def test_no_gate_beats_the_per_step_oracle_and_a_gate_that_never_opens_is_plain_stepping(replay_store):
    costs = CostTable.load("tests/fixtures/costs-llamacpp-engine-cpu.json")
    store = SweepStore.load(replay_store.path)
    decodes = [(t, suffix_matches(t.sequence, t.prompt_length, t.prompt_length + t.output_length))
               for t in (r.table() for r in store.records())]
    oracle = speed(decodes, costs, None)
    closed, plain = speed(decodes, costs, Gate(16, 10**6, 0, 4)), speed(decodes, costs, Gate(1, 0, 0, 0))
    assert closed == plain and plain == pytest.approx(costs.ar_seconds / costs.verify_seconds[1])  # all plain
    for gate in (Gate(16, 0, 0, 4), Gate(8, 2, 8, 4), Gate(4, 0, 64, 2)):
        assert speed(decodes, costs, gate) <= oracle + 1e-12


def test_the_target_confidence_at_an_anchor_is_what_a_forward_over_the_text_up_to_it_gives(replay_store):
    import torch

    from specpolicy.models.loading import load_target

    tables = [r.table() for r in list(replay_store.records())[:2]]
    confidences = target_confidences(replay_store, tables)
    target, _ = load_target(replay_store.meta["target"], dtype="float32")
    for table, confidence in zip(tables, confidences):
        assert len(confidence) == table.output_length and all(0 < c <= 1 for c in confidence)
        anchor = table.prompt_length + table.output_length // 2  # the text up to it only
        with torch.no_grad():
            logits = target(torch.tensor([list(table.sequence[:anchor + 1])])).logits[0, -1]
        assert torch.softmax(logits, -1).max().item() == pytest.approx(
            confidence[anchor - table.prompt_length], rel=1e-4)
    costs = CostTable.load("tests/fixtures/costs-llamacpp-engine-cpu.json")
    decodes = list(zip(tables, confidences))
    assert speed(decodes, costs, Gate(16, 2.0, 0, 4)) == speed(decodes, costs, Gate(1, 0, 0, 0))  # shut


def test_blocks_the_table_does_not_price_are_refused_in_one_line():
    result = CliRunner().invoke(app, ["signals", "--blocks", "8,32"])
    assert result.exit_code == 2 and "--blocks [32] are not in" in " ".join(result.output.split())
