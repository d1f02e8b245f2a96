"""Exact counterfactual replay agrees with live decoding, cycle for cycle."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.sweep.replay import build_replay

CANDIDATES = [1, 2, 4, 8, 12, 16]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_replay_matches_live_decoding_for_every_candidate(trained_pair, temperature):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, max_new_tokens=50)
    for first in (4, 8, 10, 13):
        prompt = [first, 7, first + 1, 9]
        table, trace = build_replay(decoder, prompt, CANDIDATES, max_new_tokens=50, seed=first)
        assert table.sequence[len(prompt): len(prompt) + len(trace.output_ids)] == trace.output_ids
        for size in CANDIDATES:
            live = decoder.generate(prompt, size, seed=first)
            simulated = table.simulate(size)
            assert [(c.block_size, c.accepted, c.committed) for c in live.cycles] == [
                (c.block_size, c.accepted, c.committed) for c in simulated]


def test_replay_matches_a_per_cycle_schedule(trained_pair):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=50)
    prompt = [5, 9, 6, 9]
    table, _ = build_replay(decoder, prompt, CANDIDATES, max_new_tokens=50)
    sizes = [16, 2, 8, 1, 12, 4]

    def schedule(state):
        return sizes[state.cycle % len(sizes)]

    live = decoder.generate(prompt, schedule)
    assert [c.accepted for c in live.cycles] == [c.accepted for c in table.simulate(schedule)]


def test_per_cycle_oracle_needs_no_more_cycles_than_any_fixed_size(trained_pair):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=50, stop_token_ids=[])
    table, _ = build_replay(decoder, [4, 7, 5, 9], CANDIDATES, max_new_tokens=50)
    schedule = table.per_cycle_oracle(8)
    fewest_fixed = min(len(table.simulate(b)) for b in CANDIDATES)
    assert len(schedule) <= fewest_fixed
    replayed = iter(schedule)
    assert [c.block_size for c in table.simulate(lambda s: next(replayed))] == schedule


def test_replay_rejects_sampled_drafts_and_bad_candidates(trained_pair):
    target, drafter = trained_pair
    with pytest.raises(ValueError, match="argmax drafts"):
        build_replay(SpeculativeDecoder(target, drafter, temperature=1.0, draft_sampling=True), [4, 5], [4],
                     max_new_tokens=8)
    decoder = SpeculativeDecoder(target, drafter)
    with pytest.raises(ValueError, match=">= 1"):
        build_replay(decoder, [4, 5], [0, 4], max_new_tokens=8)
    table, _ = build_replay(decoder, [4, 5], [4, 8], max_new_tokens=8)
    with pytest.raises(ValueError, match="not among this replay's candidates"):
        table.simulate(5)


def test_replay_drafts_only_reachable_anchors_and_every_schedule_stays_on_them(trained_pair):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=50, stop_token_ids=[])
    table, _ = build_replay(decoder, [4, 7, 5, 9], [4, 8, 16], max_new_tokens=50)
    replayed = table.accepted[:, 0] >= 0
    assert (table.accepted[replayed] >= 0).all() and (table.accepted[~replayed] == -1).all()
    assert replayed.sum() < len(replayed)  # accepted drafts skip anchors no schedule can land on
    rng = random.Random(0)
    for _ in range(30):
        table.simulate(lambda state: rng.choice([4, 8, 16]))  # raises on an anchor that was not replayed
    skipped = table.prompt_length + int(np.flatnonzero(~replayed)[0])
    with pytest.raises(ValueError, match="not replayed"):
        table.cycle(skipped, 1, 8)
