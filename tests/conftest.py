"""Shared fixtures (tiny Qwen3 targets and DFlash drafters, random or prebuilt in tests/fixtures) and the
tiers.

``python -m pytest`` runs the fast tier (the edit-test loop) with small Hypothesis budgets;
``python -m pytest --full`` (CI) adds the ``slow``, ``docs``, ``ray`` and ``tutorial`` tiers and
runs every property test at its full budget. ``-m TIER`` selects a tier explicitly.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from hypothesis import HealthCheck, settings

from tests.fixtures.prebuilt import PROMPTS, STORE_SETTINGS, copy_store, copy_test_zoo, load_trained_pair
from zoo_build.random_models import make_pair

STORE_CANDIDATES = tuple(STORE_SETTINGS["replay"]["candidates"])  # the replay store's

TIERS = {
    "slow": "model card, zoo training, heavy sweeps and learners",
    "docs": "the strict docs build, the generated CLI reference and ruff",
    "ray": "starts a local Ray instance",
    "tutorial": "runs a whole tutorial script and checks what it prints",
    "engine": "starts llama.cpp's llama-server (skipped, saying why, where `specpolicy engine build` has not "
         "run)",
}
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("fast", max_examples=5, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("full", max_examples=25, deadline=None, suppress_health_check=_QUIET)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run every tier (slow, docs, ray, tutorial) with full Hypothesis budgets, as CI "
                     "does")


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


@pytest.fixture(scope="session", autouse=True)
def _sb3_logs_in_pytests_own_temp(tmp_path_factory):
    """Stable-Baselines3's learn() makes a folder in the system temp per call (``SB3-<time>``); the suite's go
    under pytest's own temp, which it prunes (tutorials run as subprocesses inherit it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
        yield


@pytest.fixture(scope="session")
def random_pair():
    """(target, drafter) with random weights: vocab 97, hidden 32, 3 target layers, 2 drafter layers."""
    torch.manual_seed(0)
    return make_pair()


@pytest.fixture(scope="session")
def trained_pair():
    """(target, drafter): vocab 16, the drafter distilled on the target so drafts get accepted (shipped)."""
    return load_trained_pair()


@pytest.fixture(scope="session")
def test_zoo(tmp_path_factory):
    """(target folder, drafter folder) of a loadable tiny pair with a tokenizer and chat template (a copy
    of the shipped one)."""
    return copy_test_zoo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="session")
def prompt_file(tmp_path_factory):
    """A one-prompt-per-line TXT dataset of 8 prompts (the ones the shipped stores sweep)."""
    path = tmp_path_factory.mktemp("data") / "prompts.txt"
    shutil.copyfile(PROMPTS, path)
    return path


@pytest.fixture(scope="session")
def replay_store(test_zoo, prompt_file, tmp_path_factory):
    """A replay sweep store over the 8 test prompts, candidates 1, 2, 4, 8 and 14..18 (shipped, copied)."""
    from specpolicy.sweep.store import SweepStore

    return SweepStore.load(copy_store("replay", tmp_path_factory.mktemp("sweeps") / "replay", test_zoo,
                                      prompt_file))


@pytest.fixture(scope="session")
def verify_store(test_zoo, prompt_file, tmp_path_factory):
    """A ``--verify-lengths`` replay sweep with confidences over the 8 test prompts, candidates 1, 2, 4, 8
    (shipped, copied)."""
    from specpolicy.sweep.store import SweepStore

    return SweepStore.load(copy_store("verify", tmp_path_factory.mktemp("sweeps") / "verify", test_zoo,
                                      prompt_file))
