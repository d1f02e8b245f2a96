"""Shared fixtures: tiny Qwen3 targets and DFlash drafters built in the test."""

from __future__ import annotations

import pytest
import torch

from specpolicy.models.testing import make_pair, make_trained_pair


@pytest.fixture(scope="session")
def random_pair():
    """(target, drafter) with random weights: vocab 97, hidden 32, 3 target layers, 2 drafter layers."""
    torch.manual_seed(0)
    return make_pair()


@pytest.fixture(scope="session")
def trained_pair():
    """(target, drafter): vocab 16, the drafter distilled on the target so drafts get accepted."""
    return make_trained_pair()
