"""``split=`` is honoured with any ``sweep=`` and an unknown split is refused (reported: the environments
ignored ``split`` whenever ``sweep`` was given, so ``split="validation"`` served every prompt)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import specpolicy  # noqa: F401  (registers the IDs)
from specpolicy.data.splits import validation_ids
from specpolicy.envs.replay_data import ReplayData

ENV_IDS = ["specpolicy/BlockSize-v0", "specpolicy/BlockSizeStep-v0"]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_a_split_of_a_users_sweep_serves_exactly_that_side(replay_store, split):
    every = list(replay_store.records())
    held = validation_ids([r.split_key for r in every])
    data = ReplayData.load(str(replay_store.path), split=split)
    assert data.prompt_ids == [r.prompt_id for r in every if (r.prompt_id in held) == (split == "validation")]


def test_no_split_with_a_users_sweep_serves_every_prompt(replay_store):
    assert ReplayData.load(str(replay_store.path)).prompt_ids == [r.prompt_id for r in replay_store.records()]


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("split", ["foo", "test"])
def test_an_unknown_split_of_a_users_sweep_is_refused(replay_store, env_id, split):
    with pytest.raises(ValueError, match=f"unknown split {split!r}"):
        gym.make(env_id, sweep=str(replay_store.path), split=split)


def test_an_unknown_split_of_the_shipped_sweeps_is_refused():
    with pytest.raises(ValueError, match="unknown split 'foo'"):
        ReplayData.load(split="foo")
