"""One agent shell: agents of every environment run as policies, and saved agents are named
``agent:FOLDER``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.envs import AgentPolicy, AgentSpec, load_agent, save_agent
from specpolicy.envs.bandit import LinUCB
from specpolicy.envs.block_size import BlockSizeEnv
from specpolicy.envs.draft_verify_step import DraftVerifyStepEnv
from specpolicy.evaluation.replay import evaluate_replay, prompt_observation
from specpolicy.registry import create_policy


def _greedy_rollout(env, act, index):
    observation, _ = env.reset(options={"prompt_index": index})
    done = False
    while not done:
        observation, _, done, _, _ = env.step(act(observation))
    return [(c.block_size, c.verify_length, c.accepted) for c in env.session.cycles]


def test_a_saved_linucb_is_named_agent_folder_and_chooses_as_before(replay_store, tmp_path):
    env = BlockSizeEnv(sweep=replay_store.path, features="compact", reward="seconds")
    agent = LinUCB(env.source.observations.mean(0), env.source.observations.std(0) + 1e-6, env.candidates,
                   "compact")
    rng = np.random.default_rng(0)
    agent.b = rng.normal(size=agent.b.shape)  # a fixed, non-trivial agent
    save_agent(agent, tmp_path / "linucb", env)
    loaded = create_policy(f"agent:{tmp_path / 'linucb'}")
    assert loaded.name == f"agent:{tmp_path / 'linucb'}" and loaded.candidates == env.candidates
    for record in replay_store.records():
        observation = prompt_observation(replay_store, record)
        assert loaded.select(observation) == agent.policy().select(observation)
    assert len({loaded.select(prompt_observation(replay_store, r)) for r in replay_store.records()}) > 1


@pytest.mark.slow  # a learning run
def test_a_saved_ppo_agent_of_the_draft_verify_env_replays_its_env_choices_and_runs_in_compare(verify_store,
                                                                                                  tmp_path):
    from stable_baselines3 import PPO

    env = DraftVerifyStepEnv(sweep=verify_store.path, reward="saved")
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(32)
    folder = save_agent(model, tmp_path / "ppo", env)
    assert json.loads((folder / "agent.json").read_text())["spec"]["granularity"] == "draft_verify"
    policy = load_agent(folder)
    act = lambda obs: int(model.predict(obs, deterministic=True)[0])  # noqa: E731
    for index, record in enumerate(verify_store.records()):
        observation = prompt_observation(verify_store, record)
        replayed = record.table().simulate(policy.plan(observation))
        rolled_out = _greedy_rollout(env, act, index)
        assert [(c.block_size, c.verify_length, c.accepted) for c in replayed] == rolled_out
    result = CliRunner().invoke(app, ["compare", "--sweep", str(verify_store.path), "--policies",
                                      f"fixed8,agent:{folder}", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert f"agent:{folder}" in {row["policy"] for row in json.loads(result.stdout)}


def test_an_agent_acts_over_its_own_candidates_whatever_compare_passes(replay_store):
    spec = AgentSpec("prompt", (1, 4, 16), features="compact")
    policy = AgentPolicy(lambda obs: 2, spec)
    assert policy.candidates == (1, 4, 16) and policy.choices() == {1, 4, 16}
    [result] = evaluate_replay(replay_store, [policy])
    assert [set(p.block_sizes) for p in result.prompts] == [{16}] * len(result.prompts)


@pytest.mark.parametrize(("folder_content", "message"), [
    (None, "no saved agent in"),
    ("{not json", "is damaged"),
    ('{"format": "pickle", "spec": {"granularity": "prompt", "candidates": [1]}}',
     "unknown agent format 'pickle'"),
    ('{"format": "sb3", "algorithm": "os:system", "spec": {"granularity": "prompt", "candidates": [1]}}',
     "only stable-baselines3 and sb3-contrib"),
])
def test_a_bad_agent_folder_is_one_clear_message(tmp_path, folder_content, message):
    if folder_content is not None:
        (tmp_path / "agent.json").write_text(folder_content)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        create_policy(f"agent:{tmp_path}")


def test_a_per_cycle_agent_needs_its_budget():
    with pytest.raises(ValueError, match="token budget"):
        AgentSpec("cycle", (1, 16))
