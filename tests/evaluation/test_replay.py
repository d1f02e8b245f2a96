"""The replay evaluation's arguments from Python: refused in one line naming the argument, as the command
refuses its options (issue 54: the library's arguments)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.registry import create_policy


@pytest.mark.parametrize(("arguments", "message"), [
    ({"candidates": "4,8"}, "candidates must be a list of block sizes"),  # said "4 is not among [.., 4, ..]"
    ({"candidates": [0]}, "block size must be an integer in 1..64"),
    ({"costs": "table.json"}, "costs must be a CostTable"),  # an AttributeError
    ({"costs": Path("table.json")}, "costs must be a CostTable"),
    ({"policies": "fixed16"}, "policies must be a list of Policy objects"),  # an AttributeError
])
def test_evaluate_replays_arguments_are_checked_before_any_work(replay_store, arguments, message):
    given = {"policies": [create_policy("fixed16", replay_store.candidates)]} | arguments
    with pytest.raises(ValueError, match=message):
        evaluate_replay(replay_store, given.pop("policies"), **given)


def test_summarize_refuses_a_bootstrap_without_resamples(replay_store):
    """``n_bootstrap=0`` was an IndexError from inside numpy."""
    results = evaluate_replay(replay_store, [create_policy("fixed16", replay_store.candidates)])
    with pytest.raises(ValueError, match="n_bootstrap must be at least 1"):
        summarize(results, n_bootstrap=0)
