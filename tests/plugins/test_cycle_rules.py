"""Per-cycle rules over the whole range: exact schedules for given acceptance, table-driven."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specpolicy.costs import CostTable, expected_tokens, uniform_costs
from specpolicy.defaults import ACCEPTANCE_PRIOR, ACCEPTANCE_PRIOR_WEIGHT
from specpolicy.plugins.cycle_rules import AdaptivePolicy, GrowShrinkPolicy
from specpolicy.plugins.fixed import FixedPolicy
from specpolicy.plugins.guarded import GuardedPolicy
from specpolicy.plugins.heuristic import HeuristicPolicy
from specpolicy.plugins.verify_rules import AdaptiveVerifyPolicy
from specpolicy.policy import PromptObservation
from specpolicy.replay.lanes import State, acceptance_rate, fold_acceptance
from specpolicy.state import DecodeState

WIDE = (1, 2, 4, 8, 12, 16, 20, 24, 32)
COSTS = CostTable({1: 0.0, 2: 2.2, 4: 2.8, 8: 2.9, 12: 3.2, 16: 3.5, 20: 3.8, 24: 4.0, 32: 4.5},
                  {1: 5.3, 2: 6.4, 4: 6.8, 8: 7.4, 12: 8.0, 16: 8.7, 20: 9.4, 24: 9.8, 32: 11.0}, 5.0)


def run(policy, accepted_if: list[int], observation: PromptObservation | None = None) -> list[int]:
    """Drive ``policy`` for len(accepted_if) cycles; cycle t accepts min(accepted_if[t], B - 1) drafts."""
    observation = observation or PromptObservation(np.zeros(4, np.float32), 4, costs=COSTS)
    state = DecodeState(np.zeros(4), 4, 4, 0, 1)
    plan = policy.plan(observation)
    sizes = []
    for t, drafts in enumerate(accepted_if):
        state.cycle = t
        size = plan.block(state)
        sizes.append(size)
        state.record(size, min(drafts, size - 1))
    return sizes


GROW_CASES = [
    ([31, 31, 31], [16, 20, 24]),  # full accepts grow to the next candidate
    ([1, 1, 1], [16, 4, 4]),  # a poor block shrinks to the smallest size that holds what was accepted + 1
    ([10, 10], [16, 16]),  # accepted to more than half: keep
]


@pytest.mark.parametrize(("drafts", "expected"), GROW_CASES)
def test_grow_shrink_rule(drafts, expected):
    assert run(GrowShrinkPolicy(WIDE), drafts) == expected


def test_heuristic_moves_through_a_sparse_candidate_set():
    assert run(HeuristicPolicy(WIDE), [31, 31, 0, 0]) == [16, 20, 24, 20]
    assert run(HeuristicPolicy((14, 15, 16, 17, 18)), [20, 0, 0]) == [16, 18, 17]


def waits(cycles: list[tuple[int, int]], first_wait: int = 16, scale: float = 1.0) -> int | None:
    """Plain cycles the cost-aware rule owes after ``cycles`` ((B, accepted) each; a cycle accepting fewer
    than 2 drafts fails: a plain step costs 1, B > 1 costs 2.5), ``None``: it may speculate."""
    costs = CostTable({b: 0.0 for b in WIDE}, {b: 1.0 if b == 1 else 2.5 for b in WIDE}, 1.0)
    rule = AdaptivePolicy(WIDE, first_wait=first_wait).rule(costs, 16, 0)
    rule = replace(rule, wait_scale=scale)
    s = rule.start(np.zeros(1, np.int64))
    for b, a in cycles:
        rule.update(s, *(np.array([v]) for v in (b, a, costs.cycle_seconds(b), b)))
    return int(rule.owed(s)[0]) or None


def test_the_wait_counts_failures_since_the_last_good_cycle():
    assert waits([(16, 0), (1, 0), (1, 0)]) == 14
    assert waits([(16, 5), (16, 0)]) == 16
    assert waits([(16, 5)]) is None
    assert waits([(16, 0), (1, 0), (16, 0)]) == 32  # the wait doubles after a second failure
    assert waits([(8, 0), (1, 0), (1, 0)], scale=0.25) == 2  # 16 x 0.25 = 4 AR cycles, 2 of them run
    assert waits([(8, 0), (1, 0), (1, 0)], scale=0.01) is None  # at least 1, here already run


def rates(cycles: list[tuple[int, int, int]], decays: tuple[float, ...]) -> np.ndarray:
    """Per-draft acceptance at each of ``decays`` after ``cycles`` ((B, L, accepted) each), folded a cycle at
    a time over lanes of one request."""
    s = State(successes=np.zeros((1, len(decays))), trials=np.zeros((1, len(decays))))
    for _, length, accepted in cycles:
        fold_acceptance(s, np.array([length]), np.array([accepted]), np.array(decays))
    return acceptance_rate(s, ACCEPTANCE_PRIOR, ACCEPTANCE_PRIOR_WEIGHT)[0]


def test_geometric_acceptance_model():
    assert expected_tokens(0.5, 1) == 1 and expected_tokens(0.5, 3) == pytest.approx(1.75)
    assert rates([(16, 16, 15)] * 4, (0.8,))[0] > 0.9
    # prior 0.5 x 2 trials, decay 0.8
    assert rates([(16, 16, 0)] * 3, (0.8,))[0] == pytest.approx(1 / (2 + 1 + 0.8 + 0.64))
    assert rates([(16, 1, 0), (1, 1, 0)], (0.8,))[0] == 0.5  # plain verifies leave the prior as it is


def test_acceptance_rates_fold_every_decay_as_one_rate_each():
    """Several decays in one fold, grown a cycle at a time: each the rate folded alone (verify lengths cut
    the blocks from the third cycle on)."""
    rng = np.random.default_rng(0)
    sizes = rng.choice([1, 2, 8, 16], 40).tolist()
    cycles = []
    for n, b in enumerate(sizes):
        a = int(rng.integers(0, b))
        cycles.append((b, min(b, 4), min(a, 3)) if n >= 2 else (b, b, a))
        expected = [rates(cycles, (d,))[0] for d in (0.5, 0.8, 0.95)]
        assert rates(cycles, (0.5, 0.8, 0.95)).tolist() == pytest.approx(expected, rel=1e-12)


def test_adaptive_grows_on_easy_text_and_falls_back_on_hard_text():
    easy = run(AdaptivePolicy(WIDE), [31] * 6)
    assert easy[0] == 16 and easy[-1] == 32
    hard = run(AdaptivePolicy(WIDE), [0] * 16)
    # a failed cycle: 4 AR cycles, then a cheap probe (the acceptance estimate is low); it fails: 8 AR cycles
    assert hard == [16, 1, 1, 1, 1, 2] + [1] * 8 + [2, 1]


GPU_SHAPED = CostTable({b: 0.15 * (b > 1) for b in WIDE}, {b: 1.0 + 0.004 * (b - 1) for b in WIDE}, 1.0)
"""a cycle's cost nearly flat in B, as on a GPU at batch 1: B = 16 costs 1.21 AR steps"""


def test_one_failed_cycle_backs_off_to_ar_only_where_the_acceptance_model_says_ar_is_faster():
    """Reported: under a GPU-shaped table the default fell to 0.91x fixed16, since one failed cycle bought
    4 AR cycles even where a speculative cycle (1.21 AR steps for 4+ expected tokens) stays far faster."""
    good_then_one_miss = [15] * 4 + [0] + [15] * 4
    gpu = run(AdaptivePolicy(WIDE), good_then_one_miss, PromptObservation(np.zeros(4, np.float32), 4,
                                                                          costs=GPU_SHAPED))
    assert 1 not in gpu  # speculation stays faster in expectation: no AR stretch
    hard = run(AdaptivePolicy(WIDE), [0] * 8, PromptObservation(np.zeros(4, np.float32), 4, costs=GPU_SHAPED))
    assert hard[0] == 16 and max(hard[2:]) <= 4  # misses shrink the block to a cheap probe
    # the steep CPU table: a failed cycle still costs a stretch of AR
    cpu = run(AdaptivePolicy(WIDE), [0] * 6)
    assert cpu[:5] == [16, 1, 1, 1, 1]


def test_the_wait_shrinks_with_the_tables_flatness():
    """Under COSTS a B = 16 cycle costs 12.2 / 5.3 = 2.30 AR steps, 1.30 beyond its own token: the full wait
    (4, 8). A flat table where every block costs 1.6 (0.6 beyond) waits 4 x 0.6 / 1.3 -> 2, then probes its
    largest block."""
    assert run(AdaptivePolicy(WIDE), [0] * 6)[:6] == [16, 1, 1, 1, 1, 2]
    flat = PromptObservation(np.zeros(4, np.float32), 4,
                             costs=CostTable({b: 0.0 for b in WIDE}, {**{b: 8.48 for b in WIDE}, 1: 5.3},
                                             5.0))
    assert run(AdaptivePolicy(WIDE), [0] * 4, flat) == [16, 1, 1, 32]
    assert run(AdaptivePolicy(WIDE, full_wait_cost=0.5), [0] * 6, flat) == [16, 1, 1, 1, 1, 32]


def test_adaptive_needs_a_cost_table():
    with pytest.raises(ValueError, match="cost table"):
        run(AdaptivePolicy(WIDE), [3, 3], PromptObservation(np.zeros(4, np.float32), 4))


def test_guarded_policy_starts_where_the_per_prompt_policy_says():
    assert run(GuardedPolicy(FixedPolicy(8, WIDE), WIDE), [15, 15])[0] == 8
    ar_start = run(GuardedPolicy(FixedPolicy(1, WIDE), WIDE), [15] * 20)
    # B = 1 start: AR first (the adaptive wait), then a probe
    assert ar_start[:4] == [1] * 4 and ar_start[4] > 1


def test_guarded_policy_chooses_only_its_candidates():
    """The default on a store of blocks up to 16 (``compare --candidates``): its start is snapped to its
    candidates, so it says it picks only those; it claimed BlockPilot's trained 20, 24 and 32 too and was
    refused on any store without them."""
    narrow = (1, 2, 4, 8, 12, 16)
    guard = GuardedPolicy(FixedPolicy(32, WIDE), narrow)
    assert guard.choices() == set(narrow)
    assert set(run(guard, [15] * 8)) <= set(narrow)


ENGINE_CPU = CostTable.load("tests/fixtures/costs-llamacpp-engine-cpu.json")
"""llama.cpp's DFlash server with the shipped pair on this CPU: a B = 16 cycle costs 7.3 plain steps"""


def test_no_probe_where_no_block_would_pay_even_at_an_optimistic_acceptance():
    """Issue 55: in llama.cpp's DFlash on this CPU the guard of a prompt BlockPilot starts plain still probed
    (each probe 5-7 plain steps' worth) and the default ran at 0.86x plain decoding there. Where no block pays
    at an optimistic acceptance, such a prompt is plain decoding (a fixed plan of B = 1), and ``adaptive``
    stops probing after a failed cycle; under COSTS both probe as before."""
    sizes = (1, 2, 4, 8, 12, 16)
    engine = PromptObservation(np.zeros(4, np.float32), 4, costs=ENGINE_CPU)
    assert GuardedPolicy(FixedPolicy(1, sizes), sizes).plan(engine).block_size == 1
    assert GuardedPolicy(FixedPolicy(16, sizes), sizes).plan(engine).block_size is None  # starts speculating
    hard = run(AdaptivePolicy(sizes), [0] * 40, engine)
    assert hard[0] == 16 and set(hard[1:]) == {1}
    assert run(AdaptivePolicy(sizes), [0] * 40)[1:].count(1) < 39  # COSTS: it probes again
    assert GuardedPolicy(FixedPolicy(1, WIDE), WIDE).plan(PromptObservation(
        np.zeros(4, np.float32), 4, costs=COSTS)).block_size is None


def test_adaptive_decodes_plainly_where_not_even_its_first_probe_would_pay():
    """Issue 56's map: served at concurrency 256 on the measured H200 table, ``adaptive`` probed at its start
    block before its gate could read anything and ran at 0.88x plain decoding. Where no block pays even at an
    optimistic prior acceptance, the plan is plain decoding (B = 1 throughout, as the default's guard does);
    where one would, the rule runs from its start block as before (so ``adaptive-verify`` too)."""
    sizes = (1, 2, 4, 8, 16)
    steep = PromptObservation(np.zeros(4, np.float32), 4, costs=uniform_costs(sizes, per_token=2.0))
    assert AdaptivePolicy(sizes).plan(steep).always == 1
    assert AdaptiveVerifyPolicy(sizes).plan(steep).always == 1
    flat = PromptObservation(np.zeros(4, np.float32), 4, costs=uniform_costs(sizes, per_token=0.1))
    assert AdaptivePolicy(sizes).plan(flat).always is None
    assert AdaptivePolicy((2, 4, 8, 16)).plan(steep).always is None  # without B = 1 among its choices


CHAIN = CostTable({b: 0.3 * (b - 1) for b in WIDE}, {b: 5.0 + 0.02 * b for b in WIDE}, 5.0, drafter="chain")
"""a chain drafter's table: one drafter pass (0.3 of a 5.0 step) per drafted position"""


def engine_cycles(cycles: list[tuple[int, int]]) -> DecodeState:
    """What a serving engine has run so far: (B, accepted) per cycle, every request's, in order."""
    pooled = DecodeState.after_prefill(None, 0)
    for size, accepted in cycles:
        pooled.record(size, accepted)
    return pooled


def test_one_request_at_a_time_a_chain_drafter_drafts_from_the_engines_pooled_acceptance():
    """Issue 56 (SpecDecode-Bench at concurrency 1): each request's cost-aware rule began at the training
    block (16, DFlash's) and re-learned a chain drafter's acceptance from a prior of 0.5 over its first
    cycles, 0.984 of the best fixed K on GSM8K held out. Served, one request at a time as under load, a chain
    drafter's block is the fastest at the engine's pooled acceptance, from a request's first cycle; replayed
    alone (no engine history), or with a block drafter, the request's own cycles decide as before."""
    sizes = (1, 2, 4, 8, 16)
    history = engine_cycles([(8, 2), (8, 3), (8, 1), (8, 2)] * 10)  # about 0.6 of drafts accepted
    first = DecodeState.after_prefill(np.zeros(4), 4)
    first.pooled = history
    rule = AdaptivePolicy(sizes)
    served = PromptObservation(np.zeros(4, np.float32), 4, costs=CHAIN, concurrency=1)
    value = rule.rule(CHAIN, 16, 0)
    engine = [(b, b, a) for b, a in zip(history.block_size_history, history.accepted_history)]
    [pooled], _ = value.fastest(value.start(np.zeros(1)), rates(engine, (0.99,)))
    assert pooled == 4 and rule.step(first, served) == pooled
    alone = DecodeState.after_prefill(np.zeros(4), 4)
    assert rule.step(alone, served) == 16  # no engine history: its start block
    block = CostTable(CHAIN.draft_seconds, CHAIN.verify_seconds, 5.0)
    assert rule.step(first, PromptObservation(np.zeros(4, np.float32), 4, costs=block)) == 16


def test_an_engine_that_stops_drafting_for_poor_requests_probes_again():
    """Where the engine's pooled acceptance makes no block pay, its requests step plainly, and plain steps
    leave that acceptance as it is: a run of poor requests stopped a chain drafter's speculation for every
    later request (InstructCoder at concurrency 1: 0.82 of the best fixed K; latent under load). The rule
    steps plainly for a stretch that doubles with each failed probe (as a request's own rule waits), then
    probes again."""
    sizes = (1, 2, 4, 8, 16)
    rule = AdaptivePolicy(sizes)
    served = PromptObservation(np.zeros(4, np.float32), 4, costs=CHAIN, concurrency=4)
    state = DecodeState.after_prefill(np.zeros(4), 4)
    state.pooled = engine_cycles([(4, 0)] * 30)  # every draft rejected
    assert rule.step(state, served) == 1
    for _ in range(200):
        state.pooled.record(1, 0)
        if rule.step(state, served) > 1:
            break
    else:
        pytest.fail("the engine never drafted again after 200 plain steps")
