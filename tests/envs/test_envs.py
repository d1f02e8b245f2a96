"""The Gymnasium environments: API checks, seeding, random actions, vector env, SB3 interop, OPE."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given
from hypothesis import strategies as st

import specpolicy  # noqa: F401  (registers the IDs)
from specpolicy.cycles import Plan
from specpolicy.evaluation.ope import epsilon_greedy_log, estimate
from specpolicy.policy import PromptObservation
from specpolicy.registry import get_registry


@pytest.fixture(scope="module")
def sweep(replay_store):
    return str(replay_store.path)


@pytest.mark.parametrize("features", ["logits", "compact"])
@pytest.mark.parametrize("reward", ["tau", "time", "cost", "seconds"])
def test_block_size_env_passes_gymnasium_check(sweep, features, reward):
    env = gym.make("specpolicy/BlockSize-v0", sweep=sweep, features=features, reward=reward)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    obs2, reward_value, terminated, truncated, info = env.step(0)
    assert terminated is True and truncated is False and isinstance(reward_value, float)
    assert info["block_size"] == env.unwrapped.candidates[0] and isinstance(info["accepted"], list)


def test_step_env_passes_gymnasium_check(sweep):
    env = gym.make("specpolicy/BlockSizeStep-v0", sweep=sweep)
    check_env(env.unwrapped, skip_render_check=True)


def test_seeding_reproduces_episodes(sweep):
    def rollout(seed):
        env = gym.make("specpolicy/BlockSizeStep-v0", sweep=sweep)
        obs, _ = env.reset(seed=seed)
        out = [obs.tolist()]
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            obs, reward, done, _, _ = env.step(int(rng.integers(5)))
            out.append((obs.tolist(), reward))
        return out

    assert rollout(3) == rollout(3)


@given(actions=st.lists(st.integers(0, 4), min_size=1, max_size=60), seed=st.integers(0, 1000))
def test_random_actions_never_crash_and_rewards_match_the_store(sweep, replay_store, actions, seed):
    """Each step's outcome read straight off the store's recorded acceptance array (not through the replay
    code the env runs): accepted drafts at this anchor, tokens = min(accepted + 1, tokens left), and an
    episode's tokens are the recorded output's."""
    env = gym.make("specpolicy/BlockSizeStep-v0", sweep=sweep).unwrapped
    env.reset(seed=seed)
    produced, returns = 1, 0.0
    for action in actions:
        if env.session.done:
            assert returns + 1 == min(env.session.table.budget, env.session.table.output_length)
            env.reset(seed=seed + 1)
            produced, returns = 1, 0.0
        table, size = env.session.table, env.candidates[action]
        anchor = env.session.state.position - table.prompt_length
        recorded = int(table.accepted[anchor, table.candidates.index(size)])
        _, reward, _, _, info = env.step(action)
        assert info["accepted"] == recorded
        assert reward == min(recorded + 1, min(table.budget, table.output_length) - produced)
        produced, returns = produced + int(reward), returns + reward
    bandit = gym.make("specpolicy/BlockSize-v0", sweep=sweep).unwrapped
    _, info = bandit.reset(seed=seed)
    record = next(r for r in replay_store.records() if r.prompt_id == info["prompt_id"])
    _, reward, _, _, _ = bandit.step(actions[0])
    assert reward == pytest.approx(record.taus[bandit.candidates[actions[0]]])


def test_invalid_actions_fail_clearly(sweep):
    env = gym.make("specpolicy/BlockSize-v0", sweep=sweep).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"invalid action 9: expected an integer in \[0, 9\)"):
        env.step(9)


@pytest.mark.parametrize("env_id", ["specpolicy/BlockSize-v0", "specpolicy/BlockSizeStep-v0"])
@pytest.mark.parametrize("bad", [99, -1, 2.5, "0", True])
def test_a_prompt_index_outside_the_prompts_fails_clearly(sweep, env_id, bad):
    """Issue 54: prompt_index=99 raised IndexError from inside the source."""
    env = gym.make(env_id, sweep=sweep).unwrapped
    with pytest.raises(ValueError, match=r"options\['prompt_index'\] must be an integer in 0\.\."):
        env.reset(seed=0, options={"prompt_index": bad})


@pytest.mark.parametrize("env_id", ["specpolicy/BlockSize-v0", "specpolicy/BlockSizeStep-v0",
                                    "specpolicy/DraftVerifyStep-v0"])
@pytest.mark.parametrize(("arguments", "message"), [
    ({"backend": "live", "sweep": "runs/s"}, "sweep= and split= pick a stored sweep's prompts"),
    ({"backend": "live", "split": "train"}, "sweep= and split= pick a stored sweep's prompts"),
    ({"backend": "replay", "live": {"max_new_tokens": 8}}, "live= configures the live backend"),
])
def test_an_argument_the_backend_does_not_read_is_refused(env_id, arguments, message):
    """The live backend ignored sweep= and split= (it decoded the zoo's prompts instead), the replay backend
    live=; refused before any model loads."""
    with pytest.raises(ValueError, match=message):
        gym.make(env_id, **arguments)


def test_vector_env_same_step_autoreset(sweep):
    envs = gym.make_vec("specpolicy/BlockSize-v0", num_envs=16, vectorization_mode="vector_entry_point",
                        sweep=sweep)
    obs, _ = envs.reset(seed=0)
    assert obs.shape[0] == 16
    obs, rewards, terminated, truncated, infos = envs.step(np.zeros(16, dtype=np.int64))
    assert terminated.all() and not truncated.any() and rewards.shape == (16,)
    assert set(infos["block_size"]) == {envs.unwrapped.candidates[0]}


def test_specpolicy_policies_act_in_the_env(sweep):
    env = gym.make("specpolicy/BlockSize-v0", sweep=sweep).unwrapped
    policy = get_registry().create("fixed16", env.candidates)  # actions index the env's candidates
    obs, _ = env.reset(seed=0)
    action, _ = policy.predict(obs)
    _, _, _, _, info = env.step(action)
    assert info["block_size"] == 16


def test_sb3_trains_on_the_env_and_evaluates_a_specpolicy_policy(sweep):
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    env = gym.make("specpolicy/BlockSize-v0", sweep=sweep, features="compact")
    sb3_check_env(env.unwrapped)
    model = sb3.PPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=64)
    taus = env.unwrapped.source.taus  # [prompts, candidates]: every reward an episode can earn
    rewards, _ = evaluate_policy(model, Monitor(env), n_eval_episodes=5, return_episode_rewards=True)
    assert all(np.isclose(taus, r).any() for r in rewards)
    fixed_env = Monitor(gym.make("specpolicy/BlockSize-v0", sweep=sweep))
    fixed16 = get_registry().create("fixed16", fixed_env.unwrapped.candidates)
    rewards, _ = evaluate_policy(fixed16, fixed_env, n_eval_episodes=5, return_episode_rewards=True)
    column = taus[:, list(fixed_env.unwrapped.candidates).index(16)]
    # SB3 ran fixed16: each return is a prompt's tau(16)
    assert all(np.isclose(column, r).any() for r in rewards)


def test_ope_estimators_recover_a_known_value():
    rng = np.random.default_rng(0)
    n, k = 4000, 5
    observations = rng.normal(size=(n, 3))
    rewards = rng.normal(3.0, 0.5, size=(n, k)) + np.arange(k) * 0.2
    base = np.full(n, 2)
    target = np.where(observations[:, 0] > 0, 4, 1)
    true_value = rewards[np.arange(n), target].mean()
    log = epsilon_greedy_log(observations, rewards, base, epsilon=0.5, seed=1)
    results = estimate(log, target, n_bootstrap=300)
    for name, (value, low, high) in results.items():
        assert low <= true_value <= high, (name, value, low, high, true_value)


@pytest.mark.parametrize("epsilon", [-0.1, 1.5, float("nan")])
def test_an_exploration_rate_outside_0_1_is_refused(epsilon):
    """1.5 logged negative propensities (every estimate then meaningless) without a word."""
    rewards = np.ones((4, 3))
    with pytest.raises(ValueError, match=r"epsilon .* must be a finite number in \[0, 1\]"):
        epsilon_greedy_log(np.zeros((4, 2)), rewards, np.zeros(4, dtype=int), epsilon=epsilon)


def test_live_backend_runs_the_decoder(test_zoo, prompt_file):
    from specpolicy.models import load_pair

    target, drafter = test_zoo
    pair = load_pair(str(target), str(drafter))
    env = gym.make("specpolicy/BlockSizeLive-v0",
                   live={"dataset": str(prompt_file), "pair": pair, "max_new_tokens": 8, "max_samples": 3})
    assert env.spec.nondeterministic
    obs, info = env.reset(seed=0)
    assert obs.shape == (300,)
    _, reward, terminated, _, info = env.step(2)
    assert terminated and info["block_size"] == env.unwrapped.candidates[2]
    live = env.unwrapped.source  # the reward is the tau of a bare decode of that prompt at that block size
    prompt = next(p for p in live.prompts if p.id == info["prompt_id"])
    from specpolicy.data.prompts import encode_prompt
    from specpolicy.defaults import MAX_PROMPT_TOKENS

    trace = live.decoder.generate(encode_prompt(pair.tokenizer, prompt, MAX_PROMPT_TOKENS),
                                  info["block_size"])
    assert info["accepted"] == [c.accepted for c in trace.cycles]
    assert reward == pytest.approx(trace.tau) == pytest.approx(1 + np.mean(info["accepted"]))


def test_live_step_backend_matches_a_bare_decode(test_zoo, prompt_file):
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    target, drafter = test_zoo
    pair = load_pair(str(target), str(drafter))
    env = gym.make("specpolicy/BlockSizeStepLive-v0",
                   live={"dataset": str(prompt_file), "pair": pair, "max_new_tokens": 12, "max_samples": 2})
    obs, info = env.reset(seed=0)
    assert obs.shape == (20,)
    sizes, total, done = [], 0.0, False
    while not done:
        action = len(sizes) % 5
        obs, reward, done, _, info = env.step(action)
        sizes.append(env.unwrapped.candidates[action])
        total += reward
    prompt = next(p for p in env.unwrapped.source.prompts if p.id == info["prompt_id"])
    from specpolicy.data.prompts import encode_prompt

    ids = encode_prompt(pair.tokenizer, prompt, 256)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=12)
    bare = decoder.generate(ids, Plan(lambda s: sizes[s.cycle]))
    assert total == bare.cycle_tokens and info["tau"] == bare.tau
    env.reset(seed=1)  # abandons an episode cleanly
    env.close()


def test_step_env_seconds_reward_is_minus_the_modelled_time_and_ranks_policies(sweep, replay_store):

    env = gym.make("specpolicy/BlockSizeStep-v0", sweep=sweep, reward="seconds").unwrapped
    costs = replay_store.latency()
    returns = {}
    for action, size in enumerate(env.candidates):
        _, info = env.reset(seed=0, options={"prompt_index": 0})
        total, done = 0.0, False
        while not done:
            _, reward, done, _, _ = env.step(action)
            total += reward
        table = next(replay_store.records()).table()
        expected = -costs.seconds(c.block_size for c in table.simulate(size)) / costs.ar_seconds
        assert total == pytest.approx(expected)
        returns[size] = total
    assert len(set(round(r, 6) for r in returns.values())) > 1  # unlike tokens, time tells policies apart


def test_sb3_make_vec_env_works_without_extra_kwargs(sweep):
    env_util = pytest.importorskip("stable_baselines3.common.env_util")
    for env_id in ("specpolicy/BlockSize-v0", "specpolicy/BlockSizeStep-v0"):
        vec = env_util.make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"sweep": sweep})
        obs = vec.reset()
        assert obs.shape[0] == 2
        vec.close()


@pytest.mark.slow  # a learning run
def test_sb3_vec_env_adapter_steps_the_vector_env_and_trains_ppo():
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor

    from specpolicy.envs.sb3 import BlockSizeSB3VecEnv

    raw = BlockSizeSB3VecEnv(num_envs=16, features="compact", reward="seconds")
    env = VecCheckNan(VecMonitor(raw), raise_exception=True)
    env.seed(3)
    obs = env.reset()
    prompts = raw.env.prompt_indices().copy()
    actions = np.arange(16) % len(raw.candidates)
    _, rewards, dones, infos = env.step(actions)
    assert obs.shape == (16, raw.observation_space.shape[0]) and dones.all()
    assert np.allclose(rewards, raw.env.source.rewards[prompts, actions])
    assert all(np.array_equal(i["terminal_observation"], o) for i, o in zip(infos, obs))
    assert [i["block_size"] for i in infos] == [raw.candidates[a] for a in actions]
    PPO("MlpPolicy", env, n_steps=8, batch_size=64, seed=0, device="cpu").learn(total_timesteps=256)


@pytest.mark.slow  # a learning run
def test_linucb_learns_from_bandit_feedback_better_than_a_random_block_size():
    from specpolicy.envs.bandit import LinUCB
    from specpolicy.envs.vector import BlockSizeVectorEnv

    env = BlockSizeVectorEnv(num_envs=32, features="compact", reward="seconds")
    agent = LinUCB.for_env(env)
    agent.learn(env, steps=40)
    data = env.source
    tokens = np.array([max(1, t.tokens()) for t in data.tables])[:, None]
    per_token = data.rewards / tokens  # [prompts, candidates]: minus relative time
    chosen = agent.scores(agent.design(data.observations), explore=False).argmax(axis=1)
    learned = per_token[np.arange(len(chosen)), chosen].mean()
    assert learned > per_token.mean() + 0.05  # clearly better than picking a block size at random
    policy = agent.policy()
    observation = PromptObservation(np.zeros(4096, np.float32), 20)
    assert policy.select(observation) in env.candidates


@pytest.mark.slow  # a learning run
def test_linucb_learns_per_cycle_on_the_step_env_and_runs_as_a_per_cycle_policy():
    from specpolicy.envs.bandit import LinUCB

    env = gym.make("specpolicy/BlockSizeStep-v0", reward="time").unwrapped
    dim = env.observation_space.shape[0]
    agent = LinUCB(np.zeros(dim), np.ones(dim), env.candidates, "compact")
    assert agent.learn_cycles(env, episodes=5) > 5
    policy = agent.cycle_policy(budget=env.source.tables[0].budget)
    observation = PromptObservation(np.zeros(4096, np.float32), 20)
    cycles = env.source.tables[0].simulate(policy.plan(observation))
    assert cycles and all(c.block_size in env.candidates for c in cycles)
    with pytest.raises(ValueError, match="reward='time'"):
        agent.learn_cycles(gym.make("specpolicy/BlockSizeStep-v0").unwrapped, episodes=1)


@pytest.mark.parametrize("env_id", ["specpolicy/BlockSize-v0", "specpolicy/BlockSizeLive-v0",
                                    "specpolicy/BlockSizeStep-v0", "specpolicy/BlockSizeStepLive-v0",
                                    "specpolicy/DraftVerifyStep-v0", "specpolicy/DraftVerifyStepLive-v0"])
@pytest.mark.parametrize("reward", ["tokens_per_secnd", "seconds_live"])
def test_an_unknown_reward_is_refused_before_any_model_work_naming_the_valid_ones(env_id, reward):
    """A misspelled reward once fell through to tokens/s in the live backend; every env now refuses it."""
    with pytest.raises(ValueError, match=r"unknown reward .* use one of .*") as raised:
        gym.make(env_id, reward=reward, live={"target": "no-such-model"})
    assert "no-such-model" not in str(raised.value)


def test_the_live_per_prompt_env_refuses_a_reward_it_cannot_measure():
    """``seconds`` is priced by a cost table, which the live backend lacks: refused, not silently tokens/s."""
    expected = (r"reward 'seconds' is not offered by the per-prompt environment's live backend; "
                r"use one of tau, cost, time")
    with pytest.raises(ValueError, match=expected):
        gym.make("specpolicy/BlockSizeLive-v0", reward="seconds", live={"target": "no-such-model"})


def test_every_environment_reads_one_reward_vocabulary():
    from specpolicy.envs.rewards import REWARDS, offered

    granularities = ["prompt", "cycle", "draft_verify"]
    named = {r for g in granularities for backend in ("replay", "live") for r in offered(g, backend)}
    assert named == set(REWARDS)
