"""The replay table's array paths (the DP's outcomes, fixed-size cycle counts) against the one-cell path
(:meth:`ReplayTable.cycle`) and the commit rule on lists."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specpolicy.costs import CostTable
from specpolicy.cycles import Plan, run
from specpolicy.replay.schedules import cost_to_go, oracle_plans
from specpolicy.replay.table import ReplayTable
from specpolicy.state import REASONS, commit_length, commit_tokens, mean_acceptance

SHIPPED = ["specpolicy/zoo/tiny/sweeps/sharegpt", "specpolicy/zoo/tiny/sweeps/spec-bench",
           "specpolicy/zoo/tiny/sweeps/sharegpt-verify"]


def _tables(store, limit: int | None = None) -> list[ReplayTable]:
    return [r.table() for r in list(store.records())[:limit] if r.replay is not None]


def _cell_by_cell_value(table: ReplayTable, costs: CostTable, actions) -> np.ndarray:
    """The backward DP over (B, L) ``actions`` with every outcome from :meth:`ReplayTable.cycle`, one cell at
    a time (an action leading to an anchor no schedule reaches costs inf)."""
    p, n = table.prompt_length, table.accepted.shape[0]
    value = np.full(n, np.inf)
    for i in range(n - 1, -1, -1):
        if table.accepted[i, 0] >= 0:
            options = []
            for b, length in actions:
                _, nxt, _, done = table.cycle(p + i, i + 1, b, length)
                options.append(costs.split_cycle_seconds(b, length) + (0.0 if done else value[nxt - p]))
            value[i] = min(options)
    return value


def test_commit_length_on_arrays_is_commit_tokens_on_lists():
    """Every list of up to 5 tokens (stop token 1) at every room, as one array call."""
    cases = [(list(t), room) for n in range(6) for t in itertools.product([0, 1], repeat=n)
             for room in range(8)]
    offered = np.array([len(t) for t, _ in cases])
    first = np.array([t.index(1) if 1 in t else len(t) for t, _ in cases])
    kept, reason = commit_length(offered, first, np.array([room for _, room in cases]))
    for (tokens, room), k, r in zip(cases, kept, reason):
        assert commit_tokens(tokens, {1}, room) == (tokens[:k], REASONS[int(r)]), (tokens, room)


@pytest.mark.parametrize(("store", "verify_lengths"), [("replay_store", False), ("verify_store", False),
                                                     ("verify_store", True)])
def test_the_dp_and_fixed_counts_equal_the_cell_by_cell_replay(store, verify_lengths, request):
    """Stop tokens and budget cuts included: the test stores end on both. The one DP, whole blocks or (B,
    L)."""
    for table in _tables(request.getfixturevalue(store)):
        sizes = table.candidates
        costs = CostTable({b: 0.001 * b for b in sizes}, {b: 0.01 + 0.0003 * b for b in sizes}, 0.01)
        (value,), _, actions = cost_to_go([table], costs, sizes, verify_lengths=verify_lengths)
        assert len(actions) == (sum(sizes) if verify_lengths else len(sizes))
        expected = _cell_by_cell_value(table, costs, actions)
        assert np.array_equal(np.isinf(value), np.isinf(expected))
        finite = np.isfinite(value)
        np.testing.assert_allclose(value[finite], expected[finite], rtol=1e-12)
        assert table.fixed_cycles(sizes) == [len(table.simulate(b)) for b in sizes]
        assert table.taus() == pytest.approx({b: mean_acceptance(table.simulate(b)) for b in sizes},
                                             rel=1e-12)
        # a fixed size's cycles, walked over the arrays, are what a session runs cycle by cycle
        assert all(table.simulate(b) == run(table.session(), Plan.fixed(b)) for b in sizes)
        # and so are the per-cycle oracle's, walked by anchor (its plan a value, AnchorActions)
        (oracle,) = oracle_plans([table], costs, sizes, verify_lengths=verify_lengths)
        assert table.simulate(oracle) == run(table.session(), oracle)


@pytest.mark.slow  # 40 prompts of each shipped sweep
@pytest.mark.parametrize("path", SHIPPED)
def test_fixed_counts_equal_the_replayed_cycles_on_the_shipped_sweeps(path):
    from specpolicy.sweep.store import SweepStore

    for table in _tables(SweepStore.load(path), 40):
        assert table.fixed_cycles(table.candidates) == [len(table.simulate(b)) for b in table.candidates]
        assert all(table.simulate(b) == run(table.session(), Plan.fixed(b)) for b in table.candidates)
        expected = {b: mean_acceptance(table.simulate(b)) for b in table.candidates}
        assert table.taus() == pytest.approx(expected)


def test_a_plan_by_anchor_names_the_anchor_it_has_no_action_for(replay_store):
    """The walk refuses as the session does: the first anchor without an action, named."""
    from specpolicy.cycles import AnchorActions

    table = _tables(replay_store, 1)[0]
    plan = Plan(AnchorActions(table.prompt_length, ((1, 1), (0, 0)), "has no action here"))  # a plain step
    for cycles in (lambda: table.simulate(plan), lambda: run(table.session(), plan)):
        with pytest.raises(ValueError, match=f"anchor {table.prompt_length + 1} has no action here"):
            cycles()


@pytest.mark.parametrize("store", ["replay_store", "verify_store"])
def test_a_per_cycle_rule_walked_equals_the_session_run(store, request):
    """A whole-block rule that reads the state (history, anchor, prefill logits) walks as a session runs
    it."""
    def rule(state) -> int:
        if state.block_size_history and state.accepted_history[-1] == state.block_size_history[-1] - 1:
            return sizes[-1]
        return sizes[(state.position + state.cycle + state.prefill_logits.size) % len(sizes)]

    for table in _tables(request.getfixturevalue(store)):
        sizes = table.candidates
        for logits in (None, np.ones(3, np.float32)):
            assert table.simulate(Plan(rule), logits) == run(table.session(logits), Plan(rule))


def test_a_walked_rule_refuses_a_size_as_the_session_does(replay_store):
    """A block size the table has no column for, or not a block size: the session's ValueError, word for
    word."""
    table = _tables(replay_store, 1)[0]
    for bad in (max(table.candidates) + 1, 2.5):
        plan = Plan(lambda state, bad=bad: bad)
        with pytest.raises(ValueError) as walked:
            table.simulate(plan)
        with pytest.raises(ValueError) as session:
            run(table.session(), plan)
        assert str(walked.value) == str(session.value)


@pytest.mark.parametrize(("call", "message"), [
    (lambda t, c: t.simulate("16"), r"block size must be an integer in 1\.\.64 .*got '16'"),
    (lambda t, c: t.simulate(None), r"block size must be an integer in 1\.\.64 .*got None"),
    (lambda t, c: run(t.session(), None), r"plan must be a Plan \(Plan\.fixed\(16\), or a policy's plan"),
    (lambda t, c: t.fastest_fixed(None), r"costs must be a CostTable \(CostTable\.load\(path\)\), got None"),
    (lambda t, c: oracle_plans([t], c, []), r"candidates must name distinct block sizes"),
    (lambda t, c: cost_to_go([t], c, "4,8"), r"candidates must be a list of block sizes"),
])
def test_the_replay_api_refuses_its_arguments_in_words(replay_store, call, message):
    """Reproduced: simulate('16') and run(session, None) raised AttributeError, fastest_fixed(None) too,
    oracle_plan(costs, []) numpy's "need at least one array to stack", and cost_to_go read "4,8" as its
    characters."""
    table = _tables(replay_store, 1)[0]
    with pytest.raises(ValueError, match=message):
        call(table, replay_store.latency())
