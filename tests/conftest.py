"""Shared fixtures: tiny Qwen3 targets and DFlash drafters built in the test."""

from __future__ import annotations

import pytest
import torch

from specpolicy.models.testing import make_pair, make_trained_pair

STORE_CANDIDATES = (1, 2, 4, 8, 14, 15, 16, 17, 18)


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
