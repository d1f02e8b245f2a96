"""The field's controllers, each walked through its source's own logic on hand-made acceptance traces."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from specpolicy.costs import uniform_costs
from specpolicy.policy import PromptObservation
from specpolicy.registry import create_policy
from specpolicy.state import DecodeState

CANDIDATES = (1, 16)


def walk(name: str, accepted: Callable[[int, int], int], cycles: int, batch: int = 1, prompt_length: int = 10,
         costs=None, candidates=CANDIDATES) -> list[int]:
    """The B of each of ``cycles`` cycles where cycle ``i`` of B accepts ``accepted(B, i)`` drafts."""
    policy = create_policy(name, candidates)
    plan = policy.plan(PromptObservation(np.zeros(0, np.float32), prompt_length, "p", costs=costs))
    state = DecodeState.after_prefill(np.zeros(0, np.float32), prompt_length)
    state.batch = batch
    sizes = []
    for i in range(cycles):
        size = plan.block(state)
        assert size in policy.choices()
        sizes.append(size)
        state.record(size, min(size - 1, accepted(size, i)))
    return sizes


def requests(name: str, costs, cycles: int, count: int = 2) -> list[list[int]]:
    """The B of each cycle of ``count`` requests one after another, every draft accepted (one policy: a
    controller the engine keeps across requests carries its state)."""
    policy = create_policy(name, range(1, 17))
    observation = PromptObservation(np.zeros(0, np.float32), 10, "p", costs=costs)
    out = []
    for _ in range(count):
        plan, state = policy.plan(observation), DecodeState.after_prefill(np.zeros(0, np.float32), 10)
        out.append([])
        for _ in range(cycles):
            out[-1].append(plan.block(state))
            state.record(out[-1][-1], out[-1][-1] - 1)
    return out


def runs(sizes: list[int]) -> list[tuple[int, int]]:
    """``[16, 16, 4]`` -> ``[(16, 2), (4, 1)]``."""
    out: list[tuple[int, int]] = []
    for size in sizes:
        out[-1:] = [(size, out[-1][1] + 1)] if out and out[-1][0] == size else [*out[-1:], (size, 1)]
    return out


def test_dflash_mlx_reduces_after_a_weak_window_and_probes_early_when_reduced_blocks_fill():
    """Window 4 at B = 16 accepting 1 (acceptance 4/8 < 0.75) reduces to 4; 16 fully accepted reduced cycles
    (8 in the early window, >= 0.75 full) start an early probe of 4 full blocks; accepting 15 each (0.94, 16
    per cycle, as fast as 4 per reduced cycle under a flat table) returns to the full block."""
    costs = uniform_costs(range(1, 17))
    sizes = walk("dflash-mlx", lambda b, i: 1 if i < 4 else b - 1, 30, costs=costs)
    assert runs(sizes) == [(16, 4), (4, 16), (16, 10)]


def test_dflash_mlx_probe_that_fails_locks_out_early_probes_until_the_burst():
    """A failed early probe (accepting 1) goes back to 4 with early probes locked out, so the next probe waits
    for the burst of 64 reduced cycles, and lasts 8 cycles."""
    costs = uniform_costs(range(1, 17))
    sizes = walk("dflash-mlx", lambda b, i: 1 if b == 16 else 3, 4 + 16 + 4 + 64 + 8 + 1, costs=costs)
    assert runs(sizes) == [(16, 4), (4, 16), (16, 4), (4, 64), (16, 8), (4, 1)]


def test_dflash_mlx_probe_must_be_as_fast_as_the_reduced_block():
    """Where a cycle costs 1 + 2 (L - 1) steps, a probe committing 16 per 31 steps is slower than reduced
    cycles committing 4 per 7, so it returns to the reduced block though its acceptance passes; without the
    speed gate (ratio 0) it resumes the full block."""
    costs = uniform_costs(range(1, 17), per_token=2.0)
    gated = walk("dflash-mlx", lambda b, i: 1 if i < 4 else b - 1, 26, costs=costs)
    ungated = walk("dflash-mlx:resume_speed_ratio=0", lambda b, i: 1 if i < 4 else b - 1, 26, costs=costs)
    assert runs(gated) == [(16, 4), (4, 16), (16, 4), (4, 2)]
    assert runs(ungated) == [(16, 4), (4, 16), (16, 6)]


def test_dflash_mlx_starts_reduced_on_a_long_prompt():
    assert walk("dflash-mlx", lambda b, i: b - 1, 2, prompt_length=32768,
                costs=uniform_costs(range(1, 17)))[0] == 4


def test_dflash_mlx_count_reduces_probes_every_24_and_cools_down_after_resuming():
    """Average commits 2 <= 3 (most 2 <= 5) over the window of 4 reduce; 24 reduced cycles start a
    two-cycle probe; one probe cycle committing 5 > 4 resumes the full block; 4 cooldown cycles ignore weak
    ones, and the cycle after them finds the window weak again."""
    weak_then_good = {28: 4}  # the first probe cycle (cycle 28) accepts 4, committing 5
    sizes = walk("dflash-mlx-count", lambda b, i: weak_then_good.get(i, 1 if b == 16 else 3), 4 + 24 + 1 + 8)
    assert runs(sizes) == [(16, 4), (4, 24), (16, 6), (4, 3)]


def test_sglang_adaptive_warms_up_then_moves_one_threshold_per_update():
    """Steps 3 (B = 4) through 10 warm-up verifies; accepting 3 lifts the EMA from 2.0 to 2.96 by the 15th,
    above 3 - 0.5: steps 5 (B = 6); accepting 0 then lowers it below 3 - 0.5 - 0.25 at the next 5-verify
    update that sees it."""
    sizes = walk("sglang-adaptive", lambda b, i: 3 if i < 15 else 0, 25)
    assert runs(sizes) == [(4, 15), (6, 5), (4, 5)]


def test_sglangs_dflash_verify_length_moves_the_same_ema_over_4_8_12_16_of_a_16_token_draft():
    """sglang #24596: every draft is 16 tokens; the adaptive EMA (from 14 drafts, the whole block) picks how
    many the target verifies. Accepting 2 a cycle, the 15th cycle's update finds the EMA at 2.42: down past
    11 and 7 (their thresholds 10.25 and 6.25), not past 3 (2.25): L = 8; the 20th, 2.15: L = 4."""
    policy = create_policy("sglang-dflash-verify", CANDIDATES)
    plan = policy.plan(PromptObservation(np.zeros(0, np.float32), 10, "p"))
    state, lengths = DecodeState.after_prefill(np.zeros(0, np.float32), 10), []
    for _ in range(25):
        size, length = plan.block(state), plan.length(state, None)
        assert size == 16 and not plan.reads_block
        lengths.append(length)
        state.record(size, min(2, length - 1), length)
    assert runs(lengths) == [(16, 15), (8, 5), (4, 5)] and policy.choices() == {16}
    assert "--speculative-num-draft-tokens 16" in policy.engine_terms()


def test_sglang_adaptive_reads_the_batch_slot():
    """At batch 8 the slot's candidates are 0, 1, 3: steps 3, so B = 4; at 64 only 0: plain decoding."""
    assert walk("sglang-adaptive", lambda b, i: 0, 3, batch=8) == [4, 4, 4]
    assert walk("sglang-adaptive", lambda b, i: 0, 3, batch=64) == [1, 1, 1]
    assert create_policy("sglang-adaptive:candidate_steps=1/3/7", CANDIDATES).choices() == {1, 2, 4, 8}


def test_mistralrs_depth_follows_the_batch():
    assert walk("mistralrs-dflash", lambda b, i: 0, 2, batch=2) == [8, 8]
    assert walk("mistralrs-dflash", lambda b, i: 0, 2, batch=3) == [2, 2]
    assert walk("mistralrs-dflash:adaptive=0", lambda b, i: 0, 1, batch=3) == [8]


def test_mistralrs_adaptive_needs_four_agreeing_decisions_then_holds_32():
    """The EMA starts at the first mean (0) and stays below 7 x 0.65 - 0.25: after 8 warm-up steps, the 4th
    agreeing decision (step 11) moves to 5 drafts; 32 cooldown steps later, 4 more move to 3."""
    sizes = walk("mistralrs-adaptive", lambda b, i: 0, 11 + 32 + 4 + 1)
    assert runs(sizes) == [(8, 11), (6, 36), (4, 1)]
    assert walk("mistralrs-adaptive", lambda b, i: 0, 20, batch=3) == [8] * 20


def test_mlx_vlm_halves_weak_blocks_and_grows_strong_ones_by_two():
    """Accepting 2 of 15 drafts (0.13 < 0.30) halves 16 to 8, then to 4 (its floor); eight rounds fully
    accepted at 4 lift the window's acceptance past 0.85 with every round full: +2 a round."""
    assert runs(walk("mlx-vlm", lambda b, i: 2 if i < 2 else b - 1, 13)) == [(16, 1), (8, 1), (4, 8), (6, 1),
                                                                           (8, 1), (10, 1)]
    assert walk("mlx-vlm:first_block=6", lambda b, i: 5, 2) == [6, 8]
    # a first block below the floor is held while acceptance is middling (0.5-0.85), as mlx-vlm does
    assert walk("mlx-vlm:first_block=4,min_block_size=8", lambda b, i: 2, 3) == [4, 4, 4]


def test_mlx_vlm_dflash2_starts_at_three_and_moves_between_three_and_its_block_of_eight():
    """mlx-vlm 0.7.10's DFlash2 drafter (``DFlash2DraftModel``: ``dflash_initial_block_size = 3``,
    ``dflash_min_block_size = 3``, the checkpoint's block of 8) is the same rule with those values: rounds
    fully accepted grow by 2 to 5, 7 and the block; rounds accepting none hold 8 while the window of 8 rounds
    stays above half accepted (a mean of 2 or more), then step down by 2 to the floor of 3 and stay there."""
    name = "mlx-vlm:block_size=8,first_block=3,min_block_size=3"
    sizes = walk(name, lambda b, i: b - 1 if i < 4 else 0, 11, candidates=range(1, 9))
    assert sizes == [3, 5, 7, 8, 8, 8, 8, 6, 4, 3, 3]
    assert walk(name, lambda b, i: 0, 4, candidates=range(1, 9)) == [3, 3, 3, 3]
    assert create_policy(name, range(1, 9)).choices() == set(range(3, 9))


def test_ollama_climbs_one_trusted_position_at_a_time_and_backs_off_its_probes():
    """From plain decoding it seeds depths 0 and 1 with cost samples (the first round of a depth records
    none), then climbs a depth per 10 reaches of the deepest position while every draft is accepted; where
    nothing is accepted it parks at depth 0 and probes depth 1 at doubling intervals (4, 8, 16)."""
    costs = uniform_costs(range(1, 17), per_token=0.05)
    assert runs(walk("ollama", lambda b, i: b - 1, 40, costs=costs)) == [(1, 2), (2, 10), (3, 10), (4, 10),
                                                                        (5, 8)]
    assert runs(walk("ollama", lambda b, i: 0, 40, costs=costs)) == [
        (1, 2), (2, 10), (3, 2), (1, 1), (2, 1), (1, 7), (2, 1), (1, 15), (2, 1)]


def test_a_controller_the_engine_keeps_across_requests_starts_where_the_last_request_left_it():
    first, second = requests("ollama", uniform_costs(range(1, 17)), 25)
    assert (first[0], second[0]) == (1, 4)  # the second starts at the depth the first scheduled


def test_mistralrs_autotune_starts_mid_range_and_probes_neighbours_until_each_has_two_timings():
    """Depths 2, 3, 4, 6 and 7 (``depths_up_to``): nothing timed, the middle one (4, B = 5); every 4th
    decision a neighbour (3, then 6) with fewer than 2 timings is probed, a depth's first timing not
    counted; with every draft accepted and a verify cheap it climbs to 7 drafts, then probes a neighbour
    every 32."""
    costs = uniform_costs(range(1, 17), per_token=0.01)
    sizes = walk("mistralrs-autotune", lambda b, i: b - 1, 70, costs=costs, candidates=range(1, 17))
    assert runs(sizes)[:6] == [(5, 3), (4, 1), (5, 3), (4, 1), (5, 3), (7, 1)]
    assert runs(sizes)[-3:] == [(8, 31), (7, 1), (8, 6)]
    assert set(walk("mistralrs-autotune", lambda b, i: 0, 70, costs=costs, candidates=range(1, 17))[30:]) \
        <= {3, 4}  # nothing accepted: the shallowest, probing 3 drafts


def test_mistralrs_autotune_switches_only_for_a_three_percent_gain():
    """A dear verify (0.5 plain steps a token): 6 drafts score about 1% above 4 once timed, so 4 holds at the
    3% margin and gives way at none; the state carries to the next request as the engine's one tuner."""
    costs, every = uniform_costs(range(1, 17), per_token=0.5), (lambda b, i: b - 1)
    assert set(walk("mistralrs-autotune", every, 70, costs=costs, candidates=range(1, 17))[-30:]) <= {4, 5, 7}
    eager = walk("mistralrs-autotune:switch_margin=1", every, 70, costs=costs, candidates=range(1, 17))
    assert eager[-1] == 8
    first, second = requests("mistralrs-autotune:switch_margin=1", costs, 40)
    assert (first[0], second[0]) == (5, 8)


def test_mistralrs_autotune_cost_estimate_starts_at_the_faster_timing_and_moves_on_a_streak_of_stalls():
    """``CostEstimate``: a cold first timing is corrected by the next fast one; one stall (over 3x) is
    ignored, three in a row replace the estimate; a timing under a third of it replaces it at once."""
    from specpolicy.plugins.field_costed import _record

    cost = [0.300, 0, -1, 0]  # a first timing, as inserted
    for clock, sample in enumerate([0.300, 0.020, 0.020]):
        _record(cost, sample, clock)
    assert cost[0] == pytest.approx(0.020) and cost[2] == 2
    _record(cost, 2.0, 3)
    assert cost[0] == pytest.approx(0.020) and cost[1] == 1
    for clock in (4, 5, 6):
        _record(cost, 0.05 * 3, clock)
    assert cost[0] == pytest.approx(0.15) and cost[1] == 0
    _record(cost, 0.01, 7)
    assert cost[0] == pytest.approx(0.01)


def test_llamacpp_streak_adds_and_removes_a_draft_per_streak():
    sizes = walk("llamacpp-streak:threshold=2,n_max=4", lambda b, i: b - 1 if i >= 4 else 0, 8)
    assert sizes == [5, 5, 4, 4, 3, 3, 4, 4]


def test_llamacpp_ema_probes_up_on_full_accepts_and_averages_partial_ones():
    """From 2.0: a full accept of 2 adds 1.0 (3 drafts, B = 4); accepting 0 of 3 averages to 2.25 (B = 3)."""
    assert walk("llamacpp-ema", lambda b, i: b - 1 if i == 0 else 0, 3) == [3, 4, 3]


@pytest.mark.parametrize(("name", "message"), [
    ("dflash-mlx:window_size=0", "window_size"),
    ("sglang-adaptive:candidate_steps=", "candidate_steps"),
    ("sglang-adaptive:update_interval=0", "update_interval"),
    ("mistralrs-adaptive:depth=3", "no parameter 'depth'"),
    ("llamacpp-ema:alpha=nan", "alpha"),
    ("mistralrs-autotune:probe_interval=0", "probe_interval"),
    # found by this stop's audit: a block past 64 was accepted and the refusal told to sweep block 100
    ("mistralrs-autotune:max_drafts=99",
     r"mistralrs-autotune: the blocks its settings choose: block size must be an integer in 1\.\.64"),
    ("sglang-adaptive:candidate_steps=1/3/70", "sglang-adaptive: the blocks its settings choose"),
])
def test_bad_parameters_are_refused_naming_them(name, message):
    with pytest.raises(ValueError, match=message):
        create_policy(name, CANDIDATES)


def test_time_reading_controllers_need_a_cost_table():
    policy = create_policy("dflash-mlx", CANDIDATES)
    with pytest.raises(ValueError, match="cost"):
        policy.plan(PromptObservation(np.zeros(0, np.float32), 10, "p"))
