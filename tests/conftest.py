"""Shared fixtures (tiny Qwen3 targets and DFlash drafters built in the test) and the test tiers.

``python -m pytest`` runs the fast tier (the edit-test loop) with small Hypothesis budgets;
``python -m pytest --full`` (CI) adds the ``slow``, ``docs``, ``ray`` and ``tutorial`` tiers and
runs every property test at its full budget. ``-m TIER`` selects a tier explicitly.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, settings

from specpolicy.models.testing import make_pair, make_trained_pair

STORE_CANDIDATES = (1, 2, 4, 8, 14, 15, 16, 17, 18)

TIERS = {
    "slow": "model card, zoo training, heavy sweeps and learners",
    "docs": "the strict docs build, the generated CLI reference and ruff",
    "ray": "starts a local Ray instance",
    "tutorial": "runs a whole tutorial script and checks what it prints",
}
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("fast", max_examples=5, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("full", max_examples=25, deadline=None, suppress_health_check=_QUIET)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run every tier (slow, docs, ray, tutorial) with full Hypothesis budgets, as CI does")


def pytest_configure(config):
    for tier, what in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: {what} (runs with --full or -m {tier})")
    settings.load_profile("full" if config.getoption("--full") else "fast")


def pytest_collection_modifyitems(config, items):
    """Without --full or -m, keep the fast tier only."""
    if config.getoption("--full") or config.getoption("markexpr"):
        return
    kept, deselected = [], []
    for item in items:
        (deselected if any(item.get_closest_marker(t) for t in TIERS) else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(scope="session")
def random_pair():
    """(target, drafter) with random weights: vocab 97, hidden 32, 3 target layers, 2 drafter layers."""
    torch.manual_seed(0)
    return make_pair()


@pytest.fixture(scope="session")
def trained_pair():
    """(target, drafter): vocab 16, the drafter distilled on the target so drafts get accepted."""
    return make_trained_pair()


@pytest.fixture(scope="session")
def test_zoo(tmp_path_factory):
    """(target folder, drafter folder) of a loadable tiny pair with a tokenizer and chat template."""
    from transformers.utils import logging as hf_logging

    from specpolicy.models.testing import save_test_zoo

    hf_logging.disable_progress_bar()
    return save_test_zoo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="session")
def prompt_file(tmp_path_factory):
    """A one-prompt-per-line TXT dataset of 8 prompts."""
    path = tmp_path_factory.mktemp("data") / "prompts.txt"
    path.write_text("\n".join(["How do I sort a list?", "def add(a, b):", "The quick brown fox",
                               "Explain speculative decoding.", "Write a haiku.", "What is 2 + 2?",
                               "List three colours.", "Say hello."]) + "\n")
    return path


@pytest.fixture(scope="session")
def replay_store(test_zoo, prompt_file, tmp_path_factory):
    """A replay sweep store over the 8 test prompts, candidates 1, 2, 4, 8 and 14..18."""
    from specpolicy.data.registry import load_prompts
    from specpolicy.sweep.run import SweepSettings, run_sweep

    target, drafter = test_zoo
    settings = SweepSettings(dataset=str(prompt_file), candidates=list(STORE_CANDIDATES), max_new_tokens=24,
                             max_samples=None, target=str(target), drafter=str(drafter))
    out = tmp_path_factory.mktemp("sweeps") / "replay"
    return run_sweep(settings, str(out), load_prompts(str(prompt_file)))


@pytest.fixture(scope="session")
def verify_store(test_zoo, prompt_file, tmp_path_factory):
    """A ``--verify-lengths`` replay sweep with confidences over the 8 test prompts, candidates 1, 2, 4, 8."""
    from specpolicy.data.registry import load_prompts
    from specpolicy.sweep.run import SweepSettings, run_sweep

    target, drafter = test_zoo
    settings = SweepSettings(dataset=str(prompt_file), candidates=[1, 2, 4, 8], max_new_tokens=24, max_samples=None,
                             target=str(target), drafter=str(drafter), verify_lengths=True,
                             confidence_sizes=[2, 4, 8])
    out = tmp_path_factory.mktemp("sweeps") / "verify"
    return run_sweep(settings, str(out), load_prompts(str(prompt_file)))
