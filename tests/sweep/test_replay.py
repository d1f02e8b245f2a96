"""Exact counterfactual replay agrees with live decoding, cycle for cycle."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specpolicy.cycles import Plan
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.replay.schedules import oracle_plans
from specpolicy.sweep.replay import build_replay

CANDIDATES = [1, 2, 4, 8, 12, 16]


SLOW = pytest.mark.slow  # the fast tier keeps two greedy prompts


@pytest.mark.parametrize(("temperature", "first"), [(0.0, 4), (0.0, 8), pytest.param(0.0, 10, marks=SLOW),
                                                    pytest.param(0.0, 13, marks=SLOW),
                                                    *(pytest.param(1.0, f, marks=SLOW)
                                                      for f in (4, 8, 10, 13))])
def test_replay_matches_live_decoding_for_every_candidate(trained_pair, temperature, first):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, max_new_tokens=50)
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

    live = decoder.generate(prompt, Plan(schedule))
    assert [c.accepted for c in live.cycles] == [c.accepted for c in table.simulate(Plan(schedule))]


def _every_schedule_seconds(table, costs, sizes, position=None, produced=None):
    """Brute force: the fewest modelled seconds over every per-cycle schedule of ``sizes``."""
    if position is None:
        position, produced, done = table.start()
        if done:
            return 0.0
    best = float("inf")
    for size in sizes:
        _, nxt, made, done = table.cycle(position, produced, size)
        rest = 0.0 if done else _every_schedule_seconds(table, costs, sizes, nxt, made)
        best = min(best, costs.cycle_seconds(size) + rest)
    return best


def _oracle_schedule(table, costs, candidates=None) -> list[int]:
    """The block sizes the per-cycle time oracle's plan runs on ``table``."""
    (plan,) = oracle_plans([table], costs, candidates or table.candidates)
    return [c.block_size for c in table.simulate(plan)]


@pytest.mark.parametrize("per_token", [0.0, 0.1, 0.5])
def test_per_cycle_time_oracle_is_the_exact_optimum_over_every_schedule(trained_pair, per_token):
    from specpolicy.costs import uniform_costs

    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=8, stop_token_ids=[])
    sizes = [1, 2, 4, 8]
    costs = uniform_costs(sizes, ar_seconds=0.01, per_token=per_token)
    for prompt in ([4, 7, 5, 9], [3, 3, 8]):
        table, _ = build_replay(decoder, prompt, sizes, max_new_tokens=8)
        schedule = _oracle_schedule(table, costs)
        assert costs.seconds(schedule) == pytest.approx(_every_schedule_seconds(table, costs, sizes))
        assert costs.seconds(schedule) <= min(table.fixed_seconds(costs).values()) + 1e-12
        assert [c.block_size for c in table.simulate(Plan(lambda s, r=iter(schedule): next(r)))] == schedule


def test_per_cycle_oracle_over_a_subset_of_the_candidates(trained_pair):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=30, stop_token_ids=[])
    table, _ = build_replay(decoder, [4, 7, 5, 9], CANDIDATES, max_new_tokens=30)
    schedule = _oracle_schedule(table, None, [1, 4])
    assert set(schedule) <= {1, 4}
    assert len(schedule) <= min(len(table.simulate(b)) for b in (1, 4))


def test_replay_rejects_sampled_drafts_and_bad_candidates(trained_pair):
    target, drafter = trained_pair
    with pytest.raises(ValueError, match="argmax drafts"):
        build_replay(SpeculativeDecoder(target, drafter, temperature=1.0, draft_sampling=True), [4, 5], [4],
                     max_new_tokens=8)
    decoder = SpeculativeDecoder(target, drafter)
    with pytest.raises(ValueError, match="candidates: block size must be an integer in 1..64"):
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
        # raises on an anchor that was not replayed
        table.simulate(Plan(lambda state: rng.choice([4, 8, 16])))
    skipped = table.prompt_length + int(np.flatnonzero(~replayed)[0])
    with pytest.raises(ValueError, match="not replayed"):
        table.cycle(skipped, 1, 8)


def test_a_decode_cut_by_the_context_limit_ends_every_schedule_at_its_last_token():
    from specpolicy.costs import uniform_costs
    from specpolicy.replay.table import ReplayTable

    # 3 output tokens, no stop token, budget 10: the live decode ended at the target's context limit
    accepted = np.array([[0, 3], [0, 3], [0, 3]], dtype=np.int16)
    table = ReplayTable(2, 3, (1, 4), accepted, [5, 6, 7, 8, 9, 9, 9, 9], (), 10)
    for size in (1, 4):
        assert sum(c.committed for c in table.simulate(size)) == 2  # the output minus the prefill token
    assert _oracle_schedule(table, uniform_costs([1, 4])) == [4]

