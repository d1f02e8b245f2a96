"""Lockstep replay equals the per-prompt walk cycle for cycle: random traces, random settings of every array
controller, and the shipped sweep through evaluate_replay."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specpolicy.costs import CostTable, uniform_costs
from specpolicy.cycles import run
from specpolicy.evaluation import replay as replay_module
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.plugins.cycle_learned import CycleLearnedPolicy
from specpolicy.plugins.cycle_rules import AdaptivePolicy
from specpolicy.plugins.fixed import FixedPolicy
from specpolicy.plugins.guarded import GuardedPolicy
from specpolicy.plugins.oracle import StepOraclePolicy
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.registry import create_policy
from specpolicy.replay.lockstep import lockstep
from specpolicy.replay.table import ReplayTable

CANDIDATES = tuple(range(1, 10))
STOP = 99
BLOCKS = {"block_tokens": st.integers(2, 9), "min_block_tokens": st.integers(1, 8),
          "window_size": st.integers(1, 5), "reduced_burst_cycles": st.integers(1, 10),
          "long_context_prompt_tokens": st.sampled_from([3, 32768])}
"""dflash-mlx's blocks and windows, both versions"""
STEPS = st.lists(st.integers(0, 8), min_size=1, max_size=4).map(lambda steps: "/".join(map(str, steps)))
"""SGLang's candidate steps, as a policy name writes them"""
RULES = {  # every array controller, with a strategy for its parameters
    "llamacpp-streak": st.fixed_dictionaries({"threshold": st.integers(0, 4), "bias": st.integers(0, 2),
                                              "n_min": st.integers(0, 2), "n_max": st.integers(3, 8)}),
    "llamacpp-ema": st.fixed_dictionaries({"alpha": st.sampled_from([0.1, 0.25, 0.5]),
                                           "probe": st.sampled_from([0.5, 1.0, 2.0]),
                                           "initial": st.sampled_from([0.0, 2.0, 5.5]),
                                           "n_min": st.integers(0, 2), "n_max": st.integers(3, 8)}),
    "mistralrs-dflash": st.fixed_dictionaries({"max_drafts": st.integers(1, 8), "adaptive": st.integers(0, 1),
                                               "full_depth_max_batch": st.integers(0, 2)}),
    "mistralrs-adaptive": st.fixed_dictionaries({
        "max_drafts": st.integers(1, 8), "tiers": st.lists(st.integers(0, 9), min_size=1, max_size=3).map(
            lambda t: "/".join(map(str, t))), "ema_alpha": st.sampled_from([0.2, 0.5]),
        "tier_frac": st.sampled_from([0.3, 0.65]), "hysteresis": st.sampled_from([0.0, 0.25]),
        "up_margin": st.sampled_from([0.5, 2.0]), "sticky": st.integers(1, 3), "warmup": st.integers(0, 4),
        "cooldown": st.integers(0, 5), "max_batch": st.integers(0, 2)}),
    "sglang-adaptive": st.fixed_dictionaries({
        "candidate_steps": STEPS, "up_hysteresis": st.sampled_from([0.0, 0.5]),
        "down_hysteresis": st.sampled_from([-0.25, 0.0]), "initial_steps": st.integers(0, 8),
        "ema_alpha": st.sampled_from([0.2, 0.5]), "update_interval": st.integers(1, 5),
        "warmup_batches": st.integers(0, 10)}),
    "sglang-dflash-verify": st.fixed_dictionaries({
        "verify_block": st.just(9), "candidate_steps": STEPS, "initial_steps": st.integers(0, 8),
        "update_interval": st.integers(1, 3), "warmup_batches": st.integers(0, 4)}),
    "mlx-vlm": st.fixed_dictionaries({"block_size": st.integers(2, 9), "first_block": st.integers(0, 9),
                                      "window": st.integers(1, 8), "min_block_size": st.integers(1, 9)}),
    "dflash-mlx": st.fixed_dictionaries({
        **BLOCKS, "long_context_burst_cycles": st.integers(1, 5), "probe_cycles": st.integers(1, 4),
        "early_probe_cycles": st.integers(0, 3), "early_probe_min_cycles": st.integers(0, 6),
        "early_probe_window": st.integers(1, 4),
        "early_probe_full_acceptance": st.sampled_from([0.0, 0.5, 0.75]),
        "drop_acceptance_threshold": st.sampled_from([0.3, 0.75, 0.9]),
        "resume_acceptance_threshold": st.sampled_from([0.3, 0.8]),
        "tpc_threshold": st.sampled_from([1.5, 3.5]),
        "resume_speed_ratio": st.sampled_from([0.0, 0.9, 1.0])}),
    "dflash-mlx-count": st.fixed_dictionaries({
        **BLOCKS, "low_commit_threshold": st.sampled_from([1.5, 3.0]),
        "recent_low_commit_threshold": st.sampled_from([1.5, 2.75]), "high_commit_guard": st.integers(1, 6),
        "probe_cycles": st.integers(0, 3),
        "resume_commits": st.sampled_from([2.0, 4.25])}),
}


@st.composite
def tables(draw) -> list[ReplayTable]:
    """Prompts whose every anchor is replayed: random acceptance, some stop tokens, a budget."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        prompt, length = draw(st.integers(1, 6)), draw(st.integers(1, 30))
        accepted = np.array([[draw(st.integers(0, b - 1)) for b in CANDIDATES] for _ in range(length)],
                            dtype=np.int16)
        tail = [draw(st.sampled_from([5, 6, STOP])) for _ in range(length + max(CANDIDATES))]
        out.append(ReplayTable(prompt, length, CANDIDATES, accepted, [1] * prompt + tail, (STOP,),
                               draw(st.integers(1, 40))))
    return out


def walked(policy: Policy, table: ReplayTable, costs: CostTable, batch: int) -> tuple[list[int], int, float]:
    """B of every cycle, tokens and modelled seconds of ``policy`` on ``table``'s session (as live runs)."""
    plan, session = policy.plan(observation(table, costs)), table.session()
    session.state.batch = batch
    cycles = run(session, plan)
    return [c.block_size for c in cycles], sum(c.committed for c in cycles), costs.cycles_seconds(cycles)


def observation(table: ReplayTable, costs: CostTable) -> PromptObservation:
    return PromptObservation(np.zeros(0, np.float32), table.prompt_length, "p", costs)


def assert_lockstep_walks(policies: list[Policy], prompts: list[ReplayTable], costs: CostTable, batch: int
                          ) -> None:
    """Every policy's rule on every prompt (where it has one) stepped in one lockstep, each lane equal to the
    session's run of that policy on that prompt, cycle for cycle."""
    members = [(policy, p, policy.lockstep_rule(observation(table, costs))) for policy in policies
               for p, table in enumerate(prompts)]
    members = [m for m in members if m[2] is not None]
    assert members
    for kind in {type(rule) for *_, rule in members}:  # one lockstep per rule class, as evaluate_replay runs
        group = [m for m in members if type(m[2]) is kind]
        lanes = lockstep(prompts, [r for *_, r in group],
                         (np.array([p for _, p, _ in group]), np.arange(len(group))), costs, batch)
        for lane, (policy, p, _) in enumerate(group):
            sizes, tokens, seconds = walked(policy, prompts[p], costs, batch)
            assert lanes.block_sizes[lane].tolist() == sizes
            assert lanes.totals[1:, lane].tolist() == [tokens, len(sizes)]
            assert lanes.totals[0, lane] == pytest.approx(seconds, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(rule=st.sampled_from(sorted(RULES)), data=st.data(), prompts=tables())
def test_lockstep_equals_the_session_run_on_every_cycle(rule, data, prompts):
    params = [data.draw(RULES[rule]) for _ in range(data.draw(st.integers(1, 3)))]
    names = [f"{rule}:" + ",".join(f"{k}={v}" for k, v in p.items()) for p in params]
    costs = uniform_costs(CANDIDATES, 0.01, data.draw(st.sampled_from([0.0, 0.13, 0.5])))
    assert_lockstep_walks([create_policy(name, CANDIDATES) for name in names], prompts, costs,
                          data.draw(st.sampled_from([1, 3, 8, 40])))


@pytest.fixture(scope="module")
def mlp():
    """An MLP from 30 cycle features to 9 candidates' tokens, shaped as the shipped one (float32, 64 x 64)."""
    from sklearn.neural_network import MLPRegressor

    x = np.random.default_rng(0).normal(size=(64, 30)).astype(np.float32)
    y = np.random.default_rng(1).uniform(1, 5, size=(64, len(CANDIDATES))).astype(np.float32)
    return MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=20, random_state=0).fit(x, y)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 300), width=st.integers(1, 80), seed=st.integers(0, 2**16))
def test_the_learned_rule_forwards_every_lane_at_once_as_each_row_alone(mlp, rows, width, seed):
    """Its network's forward of many rows equals each row's forward alone, to the bit (a BLAS product of
    many rows differs from a row alone in the last bits: 264 of 278 rows of the shipped network did)."""
    from specpolicy.plugins.cycle_learned import mlp_outputs

    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(rows, 30)) * rng.uniform(0.1, 100)).astype(np.float32)
    model = mlp if width == 64 else type("Net", (), {
        "coefs_": [rng.normal(size=(30, width)).astype(np.float32), rng.normal(size=(width, 9))],
        "intercepts_": [rng.normal(size=width).astype(np.float32), rng.normal(size=9)]})
    together = mlp_outputs(model, x)
    assert np.array_equal(together, np.concatenate([mlp_outputs(model, row[None]) for row in x]))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), prompts=tables())
def test_the_house_per_cycle_rules_in_lockstep_equal_the_session_run_on_every_cycle(mlp, data, prompts):
    """``adaptive`` (random start, prior, decay and waits), the default's guard (random start, B = 1 a
    failed probe first) and the learned ``cycle`` rule (an MLP; restricted, or by regret) per prompt, over
    tables where plain steps, small blocks or whole blocks pay."""
    starts = st.sampled_from(CANDIDATES)
    policies = [AdaptivePolicy(CANDIDATES, data.draw(starts), data.draw(st.sampled_from([0.2, 0.5, 0.8])),
                               data.draw(st.sampled_from([0.5, 0.8, 0.95])), data.draw(st.integers(1, 8)),
                               data.draw(st.sampled_from([0.5, 1.3, 3.0])))
                for _ in range(data.draw(st.integers(0, 2)))]
    policies += [GuardedPolicy(FixedPolicy(data.draw(starts), CANDIDATES), CANDIDATES)
                 for _ in range(data.draw(st.integers(1 - len(policies) // 2, 2)))]
    for _ in range(data.draw(st.integers(0, 2))):
        learned = CycleLearnedPolicy(CANDIDATES, mlp, data.draw(starts), data.draw(st.sampled_from(
            ["committed", "regret"])))
        policies.append(learned.restrict(data.draw(st.lists(starts, min_size=1))))
    draft, per_token = (data.draw(st.sampled_from(v)) for v in ([0.0, 0.002, 0.01], [0.0, 0.13, 0.5]))
    costs = CostTable({b: draft * (b > 1) for b in CANDIDATES},
                      {b: 0.01 * (1 + per_token * (b - 1)) for b in CANDIDATES}, 0.01)
    assume(any(p.lockstep_rule(observation(t, costs)) for p in policies for t in prompts))
    assert_lockstep_walks(policies, prompts, costs, 1)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), prompts=tables())
def test_the_per_cycle_oracle_planned_for_every_prompt_at_once_walks_as_each_alone(data, prompts):
    """One dynamic programme over prompts of different lengths (padded) plans each as the programme over the
    prompt alone, and lockstep runs those plans as the walk does."""
    draft, per_token = (data.draw(st.sampled_from(v)) for v in ([0.0, 0.002, 0.01], [0.0, 0.13, 0.5]))
    costs = CostTable({b: draft * (b > 1) for b in CANDIDATES},
                      {b: 0.01 * (1 + per_token * (b - 1)) for b in CANDIDATES}, 0.0099)
    oracle = StepOraclePolicy(data.draw(st.sampled_from([CANDIDATES, (1, 3, 9), (2, 5)])))
    rules = oracle.lockstep_rules([Answers({}, table) for table in prompts], costs)
    for table, rule in zip(prompts, rules):  # a plan by anchor, or plain decoding where that is faster
        assert rule == oracle.plan(observation(table, costs), Answers({}, table)).block
    for kind in {type(rule) for rule in rules}:  # one lockstep per rule class, as evaluate_replay runs
        group = [(p, rule) for p, rule in enumerate(rules) if type(rule) is kind]
        lanes = lockstep(prompts, [r for _, r in group], (np.array([p for p, _ in group]),
                                                          np.arange(len(group))), costs)
        for lane, (p, _) in enumerate(group):
            cycles = prompts[p].simulate(oracle.plan(observation(prompts[p], costs), Answers({}, prompts[p])))
            assert lanes.block_sizes[lane].tolist() == [c.block_size for c in cycles]
            assert lanes.totals[1:, lane].tolist() == [sum(c.committed for c in cycles), len(cycles)]
            assert lanes.totals[0, lane] == pytest.approx(costs.cycles_seconds(cycles), rel=1e-12)


def test_evaluate_replay_runs_array_controllers_in_lockstep_as_the_walk_runs_them(replay_store, monkeypatch):
    names = ["llamacpp-ema:n_min=0,n_max=1", "llamacpp-ema:n_min=0,n_max=1,alpha=0.5,initial=0.5",
             "llamacpp-streak:threshold=2,n_max=1", "mistralrs-dflash:max_drafts=3", "dflash-mlx",
             "dflash-mlx:window_size=2,tpc_threshold=1.5", "dflash-mlx-count", "adaptive", "adaptive4",
             "fixed4", "oracle-step", "oracle", "oracle-tau"]
    store = replay_store
    policies = [create_policy(name, store.candidates) for name in names]
    # per prompt: fixed4's plan, the oracles' rules planned for every prompt at once (lockstep_rules)
    assert [p.lockstep_rule() is not None for p in policies] == [True] * 7 + [False] * 6
    assert store.latency() is not None  # priced by one table: what lockstep runs
    calls = []
    monkeypatch.setattr(replay_module, "lockstep", lambda *a: calls.append(a) or lockstep(*a))
    stepped = evaluate_replay(store, policies)
    assert len(calls) == 8  # one per rule class, the fixed plan's and the oracle's too
    for policy in policies:  # no rule: every prompt walked
        monkeypatch.setattr(policy, "lockstep_rule", lambda observation=None: None)
        monkeypatch.setattr(policy, "lockstep_rules", lambda answers, costs: [None] * len(answers))
    walked_results = evaluate_replay(store, policies)
    assert len(calls) == 8
    for ours, theirs in zip(stepped, walked_results):
        for a, b in zip(ours.prompts, theirs.prompts, strict=True):
            assert (a.block_sizes, a.tokens, a.cycles, a.oracle_block_size) == \
                (b.block_sizes, b.tokens, b.cycles, b.oracle_block_size)
            assert (a.seconds, a.ar_seconds, a.tau) == pytest.approx((b.seconds, b.ar_seconds, b.tau),
                                                                     rel=1e-12)


def test_lockstep_names_an_anchor_the_sweep_did_not_replay_as_the_walk_does():
    accepted = np.array([[0, 0], [-1, -1], [0, 0]], dtype=np.int16)
    table = ReplayTable(2, 3, (1, 2), accepted, [1, 1, 5, 6, 7, 8, 9], (), 10)
    controller = create_policy("llamacpp-streak:n_max=1,n_min=0", (1, 2)).lockstep_rule()
    with pytest.raises(ValueError, match="anchor 3 was not replayed"):
        lockstep([table], [controller], (np.zeros(1, np.int64), np.zeros(1, np.int64)), uniform_costs((1, 2)))


def test_a_rule_whose_plan_verifies_part_of_each_block_is_walked(verify_store):
    """Found by the differential check against the scalar rule: ``adaptive-verify`` (adaptive's blocks, then
    marginal's verify length) ran in lockstep as whole blocks; a plan with a verify rule is walked."""
    from specpolicy.evaluation.replay import prompt_observation

    observation = prompt_observation(verify_store, next(verify_store.records()), verify_store.latency())
    rules = [create_policy(name, verify_store.candidates).lockstep_rule(observation)
             for name in ("adaptive", "adaptive-verify")]
    assert rules[0] is not None and rules[1] is None
