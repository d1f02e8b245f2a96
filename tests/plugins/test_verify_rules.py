"""Verify-length policies: the rules table-driven, the (B, L) oracle exact against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.costs import uniform_costs
from specpolicy.cycles import ConfidentPrefix
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.plugins.verify_rules import marginal_length
from specpolicy.policy import Answers, PromptObservation
from specpolicy.registry import get_registry
from specpolicy.replay.schedules import cost_to_go, oracle_plans
from specpolicy.state import DraftedBlock
from specpolicy.sweep.replay import build_replay

SIZES = [1, 2, 4, 8]


@pytest.mark.parametrize(("confidences", "threshold", "length"), [
    ([], 0.3, 1),
    ([0.9, 0.9, 0.9], 0.0, 4),
    ([0.9, 0.8, 0.2, 0.9], 0.5, 3),
    ([0.2, 0.99], 0.3, 1),
    ([1.0, 1.0], 1.0, 3),
])
def test_confident_prefix(confidences, threshold, length):
    assert ConfidentPrefix(threshold).length(confidences) == length


@pytest.mark.parametrize(("confidences", "per_token", "length"), [
    ([0.99] * 7, 0.0, 8),  # verifying is free: check every draft
    ([0.0] * 7, 0.1, 1),  # no draft can pass: verify the anchor alone
    ([0.95, 0.9, 0.05, 0.9, 0.9, 0.9, 0.9], 0.2, 3),  # the chain breaks at the third draft
])
def test_marginal_rule_maximises_expected_tokens_per_second(confidences, per_token, length):
    costs = uniform_costs([1, 2, 4, 8], ar_seconds=1.0, per_token=per_token)
    assert marginal_length(costs, [8])(None, DraftedBlock(8, tuple(confidences))) == length


def _brute_force(table, costs, position, produced):
    """The fewest modelled seconds over every (B, L) schedule from ``position`` (every schedule is tried;
    the best finish from a (position, produced) state is remembered, as the future depends on nothing
    else)."""
    import functools

    @functools.cache
    def best(position, produced):
        options = []
        for size in SIZES:
            for length in range(1, size + 1):
                cycle, nxt, made, done = table.cycle(position, produced, size, length)
                options.append(costs.cycles_seconds([cycle]) + (0.0 if done else best(nxt, made)))
        return min(options)

    return best(position, produced)


@pytest.mark.parametrize("per_token", [0.05, 0.5])
def test_verify_oracle_is_the_exact_optimum_over_every_block_and_verify_schedule(trained_pair, per_token):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=7, stop_token_ids=[])
    costs = uniform_costs(SIZES, ar_seconds=0.01, per_token=per_token)
    for prompt in ([4, 7, 5, 9], [3, 3, 8]):
        table, _ = build_replay(decoder, prompt, SIZES, max_new_tokens=7, verify_lengths=True)
        (value,), _, _ = cost_to_go([table], costs, SIZES, verify_lengths=True)
        position, produced, _ = table.start()
        assert value[0] == pytest.approx(_brute_force(table, costs, position, produced))
        # a length by position reads no drafted block: it runs on a replay without confidences
        cycles = table.simulate(oracle_plans([table], costs, SIZES, verify_lengths=True)[0])
        assert costs.cycles_seconds(cycles) == pytest.approx(value[0])
        _, (q,), _ = cost_to_go([table], costs, SIZES)
        assert value[0] <= q[0].min() + 1e-12  # never slower than the best B-only schedule


def test_registered_verify_policies_run_on_a_replay(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=30)
    table, _ = build_replay(decoder, [4, 7, 5, 9], SIZES, max_new_tokens=30, verify_lengths=True,
                            confidence_sizes=[2, 4, 8])
    costs = uniform_costs(SIZES, ar_seconds=0.01, per_token=0.05)
    observation = PromptObservation(np.zeros(0, dtype=np.float32), 4, "p", costs)
    seconds = {}
    for name in ("threshold", "threshold:0.5", "marginal", "marginal4", "adaptive-verify", "oracle-verify"):
        policy = get_registry().create(name, SIZES)
        cycles = table.simulate(policy.plan(observation, Answers({}, table)))
        assert sum(c.committed for c in cycles) == table.tokens()
        assert all(c.accepted <= c.verify_length - 1 for c in cycles)
        seconds[name] = costs.cycles_seconds(cycles)
    assert seconds["oracle-verify"] <= min(seconds.values()) + 1e-12


def test_a_verify_policy_on_a_sweep_without_confidences_is_refused_up_front():
    from specpolicy.evaluation.replay import check_candidates

    policy = get_registry().create("threshold", SIZES)
    with pytest.raises(ValueError, match="--confidences 8"):
        check_candidates(policy, SIZES, [])
    check_candidates(policy, SIZES, [8])


RUN_ON_THE_SHIPPED_CONFIDENCE_SWEEP = ["threshold", "marginal", "oracle-verify", "vllm-adaptive",
                                       "llamacpp-pmin",
                                       "llamacpp-pmin:n_max=7,p_min=0.5", "llamacpp-pmin:n_max=15,p_min=0.5",
                                       "trtllm-schedule", "vllm-dsd"]


def test_the_zoo_page_says_which_verify_rules_run_on_the_shipped_confidence_sweep():
    """docs/zoo.md: the rules drafting blocks of 8, 16 or 32 run on sharegpt-verify; adaptive-verify is
    refused (issue 48: the page said every (B, L) policy ran)."""
    from specpolicy.evaluation.replay import check_policies
    from specpolicy.sweep.store import SweepStore
    from specpolicy.zoo import ZOO_DIR

    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt-verify")
    registry = get_registry()
    check_policies([registry.create(name, store.candidates) for name in RUN_ON_THE_SHIPPED_CONFIDENCE_SWEEP],
                   store)
    for refused in ("adaptive-verify", "llamacpp-pmin:n_max=3,p_min=0.5"):
        with pytest.raises(ValueError,
                           match="reads the drafter's confidences at B = .*which the sweep did not"):
            check_policies([registry.create(refused, store.candidates)], store)
