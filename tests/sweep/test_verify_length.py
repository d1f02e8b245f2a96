"""The second knob: verify length L <= B. Lossless for every (B, L); replay of (B, L) = live, cycle for
cycle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.arguments import check_verify_length
from specpolicy.costs import uniform_costs
from specpolicy.cycles import CycleRecord, Plan
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.sweep.records import ReplayEntry
from specpolicy.sweep.replay import build_replay

CANDIDATES = [1, 2, 4, 8, 16]
PROMPTS = ([4, 7, 5, 9], [8, 7, 9, 9], [13, 7, 14, 9])


def rows(cycles):
    return [(c.block_size, c.accepted, c.committed, c.verify_length) for c in cycles]


@pytest.mark.parametrize(("block_size", "verify"), [
    (16, 2), (4, 9), (1, 1),
    *(pytest.param(b, v, marks=pytest.mark.slow) for b, v in ((16, 1), (16, 5), (16, 16), (8, 3)))])
def test_every_block_and_verify_length_gives_the_greedy_output(trained_pair, block_size, verify):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    for prompt in PROMPTS:
        reference = decoder.generate(prompt, 1)
        trace = decoder.generate(prompt, Plan.fixed(block_size, verify))
        assert trace.output_ids == reference.output_ids
        assert all(c.accepted <= min(verify, c.block_size) - 1 for c in trace.cycles)
        assert all(c.verify_length == min(verify, c.block_size) for c in trace.cycles)


@given(st.lists(st.tuples(st.sampled_from(CANDIDATES), st.integers(1, 16)), min_size=1, max_size=6))
def test_any_per_cycle_block_and_verify_schedule_is_lossless_and_replays_exactly(trained_pair, pairs):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=40)
    prompt = PROMPTS[1]
    table, _ = build_replay(decoder, prompt, CANDIDATES, max_new_tokens=40, verify_lengths=True,
                            confidence_sizes=[2, 4, 8, 16])

    def size(state):
        return pairs[state.cycle % len(pairs)][0]

    def verify(state, drafted):
        return min(pairs[state.cycle % len(pairs)][1], drafted.block_size)

    live = decoder.generate(prompt, Plan(size, verify))
    assert live.output_ids == decoder.generate(prompt, 1).output_ids
    assert rows(table.simulate(Plan(size, verify))) == rows(live.cycles)


def test_a_confidence_rule_replays_exactly_from_recorded_confidences(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=48)
    seen_live, seen_replay = [], []

    def rule(seen):
        def verify(state, drafted):
            seen.append(list(drafted.confidences))
            running, length = 1.0, 1
            for c in drafted.confidences:
                running *= c
                if running < 0.4:
                    break
                length += 1
            return length
        return verify

    agreed = 0
    for prompt in PROMPTS:
        table, _ = build_replay(decoder, prompt, CANDIDATES, max_new_tokens=48, verify_lengths=True,
                                confidence_sizes=[8, 16])
        live = decoder.generate(prompt, Plan.fixed(16).with_length(rule(seen_live)))
        replayed = table.simulate(Plan.fixed(16).with_length(rule(seen_replay)))
        assert rows(replayed) == rows(live.cycles)
        agreed += len(live.cycles)
    assert seen_live == seen_replay  # the rule read the same numbers in both
    assert any(c < 1.0 for block in seen_live for c in block) and agreed > 3


def test_confidences_and_entropies_survive_the_store_round_trip(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=30)
    table, _ = build_replay(decoder, PROMPTS[0], CANDIDATES, max_new_tokens=30, verify_lengths=True,
                            confidence_sizes=[16])
    back = ReplayEntry.from_table(table).table(table.prompt_length)
    np.testing.assert_array_equal(back.confidences[16], table.confidences[16])
    np.testing.assert_array_equal(back.entropies[16], table.entropies[16])
    assert np.nanmax(table.entropies[16]) > 0
    assert back.drafted_block(table.prompt_length, 16) == table.drafted_block(table.prompt_length, 16)


def test_replay_without_recorded_confidences_names_the_fix(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=20)
    table, _ = build_replay(decoder, PROMPTS[0], CANDIDATES, max_new_tokens=20)
    with pytest.raises(ValueError, match="--confidences"):
        table.simulate(Plan.fixed(16).with_length(lambda state, drafted: 2))


def test_verify_length_checks():
    assert check_verify_length(3, 16) == 3
    for bad in (0, 17, 2.5, True):
        with pytest.raises(ValueError, match="1..16"):
            check_verify_length(bad, 16)


def test_a_cut_block_is_priced_at_its_verify_length():
    costs = uniform_costs([1, 2, 4, 8, 16], ar_seconds=1.0, per_token=0.1)
    full, cut = CycleRecord(16, 3, 4), CycleRecord(16, 3, 4, verified=4)
    assert cut.verify_length == 4 and full.verify_length == 16
    expected = costs.draft_seconds.get(16, 0.0) + costs.verify_seconds[4]
    assert costs.cycles_seconds([cut]) == pytest.approx(expected)
    assert costs.cycles_seconds([cut]) < costs.cycles_seconds([full])
    assert costs.verify_cost(6) == pytest.approx((costs.verify_seconds[4] + costs.verify_seconds[8]) / 2)
