"""Agents saved from the vector envs stable-baselines3 trains on keep their observation normalisation
(reported: ``save_agent`` raised AttributeError on ``make_vec_env``'s DummyVecEnv and on BlockSizeSB3VecEnv,
and tutorial 6's VecNormalize statistics were dropped on save, so the loaded agent always chose B = 1)."""

from __future__ import annotations

import pytest

from specpolicy.envs import load_agent, save_agent
from specpolicy.envs.block_size import BlockSizeEnv
from specpolicy.envs.sb3 import BlockSizeSB3VecEnv
from specpolicy.evaluation.replay import prompt_observation
from specpolicy.registry import create_policy


def _ppo(env):
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
    return model.learn(32)


def test_an_agent_trained_under_vecnormalize_acts_identically_after_loading(replay_store, tmp_path):
    from stable_baselines3.common.vec_env import VecNormalize

    vec = VecNormalize(BlockSizeSB3VecEnv(num_envs=4, sweep=replay_store.path, features="compact",
                                          reward="seconds"),
                       gamma=0.0)
    model = _ppo(vec)
    vec.obs_rms.mean += 3.0  # statistics far from identity: dropping them would change the choices
    save_agent(model, tmp_path / "ppo", vec)
    loaded = create_policy(f"agent:{tmp_path / 'ppo'}")
    raw = BlockSizeEnv(sweep=replay_store.path, features="compact").source.observations
    expected = model.predict(vec.normalize_obs(raw), deterministic=True)[0]
    got = [loaded.candidates.index(loaded.select(prompt_observation(replay_store, r)))
           for r in replay_store.records()]
    assert got == expected.tolist()


@pytest.mark.parametrize("kind", ["make_vec_env", "specpolicy"])
def test_save_agent_takes_the_vector_envs_sb3_trains_on(replay_store, tmp_path, kind):
    from stable_baselines3.common.env_util import make_vec_env

    env = (make_vec_env(BlockSizeEnv, n_envs=2,
                        env_kwargs={"sweep": replay_store.path, "features": "compact"})
           if kind == "make_vec_env" else BlockSizeSB3VecEnv(num_envs=2, sweep=replay_store.path,
                                                             features="compact"))
    folder = save_agent(_ppo(env), tmp_path / kind, env)
    assert load_agent(folder).spec.features == "compact"


def test_a_missing_or_mismatched_model_file_is_named(replay_store, tmp_path):
    env = BlockSizeEnv(sweep=replay_store.path, features="compact")
    folder = save_agent(_ppo(env), tmp_path / "ppo", env)
    (folder / "model.zip").write_bytes((folder / "model.zip").read_bytes()[:100])
    with pytest.raises(ValueError, match="model.zip is damaged"):
        load_agent(folder)
    (folder / "model.zip").unlink()
    with pytest.raises(FileNotFoundError, match=r"model\.zip is missing"):
        load_agent(folder)


def _normalised(replay_store, tmp_path):
    from stable_baselines3.common.vec_env import VecNormalize

    vec = VecNormalize(BlockSizeSB3VecEnv(num_envs=2, sweep=replay_store.path, features="compact"), gamma=0.0)
    return save_agent(_ppo(vec), tmp_path / "ppo", vec)


def test_damaged_or_wrong_sized_statistics_and_a_wrong_spec_are_named(replay_store, tmp_path):
    """Issue 48: a truncated normalisation.npz was 'a bug in specpolicy', a wrong-sized one a raw numpy error
    at the first decision, and a wrong observation_size in agent.json was ignored."""
    import json

    import numpy as np

    folder = _normalised(replay_store, tmp_path)
    stats = folder / "normalisation.npz"
    good = stats.read_bytes()
    stats.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"normalisation\.npz is missing or damaged"):
        load_agent(folder)
    np.savez(stats, mean=np.zeros(3), var=np.ones(3))
    with pytest.raises(ValueError,
                       match=r"normalisation\.npz holds statistics of 3 features; the agent reads"):
        load_agent(folder)
    stats.write_bytes(good)
    spec = json.loads((folder / "agent.json").read_text())
    spec["spec"]["observation_size"] += 5
    (folder / "agent.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError,
                       match=r"the agent reads observations of \d+ .*agent\.json says observations of"):
        load_agent(folder)


def test_save_agent_refuses_an_environment_the_agent_did_not_learn_on(replay_store, tmp_path):
    """Issue 48: save_agent saved the spec of whatever environment it was handed."""
    from specpolicy.envs.block_size_step import BlockSizeStepEnv

    model = _ppo(BlockSizeEnv(sweep=replay_store.path, features="compact"))
    other = BlockSizeStepEnv(sweep=replay_store.path)
    with pytest.raises(ValueError,
                       match="the agent reads observations of .* acts over .*; the environment says"):
        save_agent(model, tmp_path / "ppo", other)
    assert not (tmp_path / "ppo").exists()
