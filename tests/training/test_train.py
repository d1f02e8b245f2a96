"""``specpolicy.training.train`` from Python: its arguments refused as the command's options are, before any
data is read."""

from __future__ import annotations

import pytest

from specpolicy.training.train import TrainArgs


@pytest.mark.parametrize(("arguments", "message"), [
    ({"batch_size": 0}, "batch_size must be an integer >= 1"),  # a RuntimeError from inside torch
    ({"epochs": 0}, "epochs must be an integer >= 1"),  # accepted: saved an untrained policy
    ({"patience": 0}, "patience must be an integer >= 1"),
    ({"window": -1}, "window must be an integer >= 0"),  # "no candidate within -1 of 16"
    ({"validation_share": 0.95}, r"validation_share .* must be a finite number in \[0, 0.5\]"),  # accepted
    ({"validation_share": float("nan")}, r"validation_share .* must be a finite number in \[0, 0.5\]"),
    ({"candidates": "4,8"}, "candidates must be a list of block sizes"),  # split into characters
    ({"lr": float("nan")}, r"lr must be a finite number > 0, got nan"),  # torch's "Invalid learning rate"
    ({"lr": 0.0}, r"lr must be a finite number > 0"),  # accepted: trained nothing
    ({"weight_decay": float("inf")}, r"weight_decay must be a finite number >= 0"),  # accepted
    ({"dropout": 1.5}, r"dropout must be a finite number in \[0, 1\), got 1.5"),  # torch's words
    ({"dropout": True}, r"dropout must be a finite number"),  # a bool read as 1
    ({"hidden": 0}, "hidden must be an integer >= 1"),  # refused only after the sweep was read
    ({"depth": -3}, "depth must be an integer >= 1"),
])
def test_training_arguments_are_checked_as_the_command_checks_them(arguments, message):
    with pytest.raises(ValueError, match=message):
        TrainArgs(**arguments)
