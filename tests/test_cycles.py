"""The one rule two decodes agree by (table-driven)."""

from __future__ import annotations

import pytest

from specpolicy.cycles import CycleRecord
from specpolicy.evaluation.metrics import cycles_agree


@pytest.mark.parametrize(("live", "replayed", "expected"), [
    ([(16, 3, 4), (16, 15, 16)], [(16, 3, 4), (16, 15, 16)], (2, 2, None)),
    ([(16, 3, 4), (16, 15, 16)], [(16, 3, 4), (16, 14, 15)], (1, 2, 1)),  # accepted differs at cycle 1
    ([(16, 3, 4)], [(16, 3, 4), (4, 0, 1)], (1, 2, 1)),  # one decode ran a cycle more
    ([(8, 3, 4, 6)], [(8, 3, 4)], (0, 1, 0)),  # the same drafts, verified to 6 live and to 8 in replay
])
def test_cycles_agree_counts_equal_cycles_and_names_the_first_difference(live, replayed, expected):
    cycles = [[CycleRecord(b, a, c, verified=rest[0] if rest else 0) for b, a, c, *rest in side]
              for side in (live, replayed)]
    assert cycles_agree(*cycles) == expected


def test_replay_and_live_read_a_plan_by_anchor_alike(verify_store):
    """Reported: ``Plan(AnchorActions(...))`` without a length verified the anchors' L in
    ``ReplayTable.simulate`` but whole blocks through ``run(table.session(), plan)``."""
    from specpolicy.cycles import AnchorActions, Plan, run

    for record in verify_store.records():
        table = record.table()
        plan = Plan(AnchorActions(table.prompt_length, tuple([(8, 2)] * 200)))
        replayed, stepped = table.simulate(plan), run(table.session(), plan)
        assert [c.verify_length for c in replayed] == [c.verify_length for c in stepped]
        assert {c.verify_length for c in replayed} <= {2}
        assert [c.committed for c in replayed] == [c.committed for c in stepped]


@pytest.mark.parametrize(("make", "message"), [
    (lambda c: c.ConfidentPrefix(float("nan")), "threshold .*must be a finite number in \\[0, 1\\], got nan"),
    (lambda c: c.ConfidentPrefix(-1.0), "threshold .*in \\[0, 1\\], got -1.0"),
    (lambda c: c.ConfidentPrefix(2.0), "threshold .*in \\[0, 1\\], got 2.0"),
    (lambda c: c.ConfidentPrefix("0.5"), "threshold .*got '0.5'"),
    (lambda c: c.AnchorActions(4, ((8, 9),)), "verify length"),
    (lambda c: c.AnchorActions(4, ((8, 2.5),)), "verify length"),
    (lambda c: c.AnchorActions(4, ((True, 1),)), "block size"),
    (lambda c: c.AnchorActions("16", ((8, 2),)), "first anchor must be an integer"),
    (lambda c: c.AnchorActions(4, ((8,),)), "\\(B, L\\) pairs"),
    (lambda c: c.Plan(c.ConfidentPrefix(0.5)), "verify rule goes second"),
    (lambda c: c.Plan(c.Plan.fixed(4).block, length=3), "length picks L after a draft"),
])
def test_plan_values_check_themselves_when_built(make, message):
    """Reported: ``ConfidentPrefix(nan)``, ``-1.0`` and ``2.0`` and ``AnchorActions`` with L > B, L = 2.5 or
    B = True passed silently; ``ConfidentPrefix("0.5")``, ``AnchorActions(first="16")`` and
    ``Plan(ConfidentPrefix(0.5))`` ended in raw TypeErrors."""
    from specpolicy import cycles

    with pytest.raises(ValueError, match=message):
        make(cycles)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("blocks", (0,), "block size"), ("blocks", (8, 4), "ascending"), ("ar_seconds", -1, "ar_seconds"),
    ("prior", float("nan"), "prior"), ("decay", 2.0, "decay"), ("first_wait", -3, "first_wait")])
def test_a_cost_aware_rule_checks_its_parameters(field, value, message):
    """Reported: ``CostAwareBlocks`` with ``blocks=(0,)``, ``ar_seconds=-1`` or ``prior=nan`` passed
    silently."""
    from dataclasses import replace

    import numpy as np

    from specpolicy.costs import uniform_costs
    from specpolicy.policy import PromptObservation
    from specpolicy.registry import create_policy

    policy = create_policy("adaptive", [1, 2, 4, 8])
    costs = uniform_costs([1, 2, 4, 8], per_token=0.1)
    rule = policy.plan(PromptObservation(np.zeros(4, np.float32), 10, costs=costs)).block
    assert rule.blocks == (2, 4, 8)
    with pytest.raises(ValueError, match=message):
        replace(rule, **{field: value})
