"""DraftVerifyStep-v0: B, then L after seeing the drafts; cycles, confidences and returns as exact replay."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import specpolicy  # noqa: F401  (registers the IDs)
from specpolicy.cycles import Plan
from specpolicy.envs.draft_verify_step import DraftVerifyStepEnv

# (B, L) per cycle, both among the candidates 1, 2, 4, 8
PLAN = [(8, 2), (4, 4), (1, 1), (8, 8), (2, 1), (8, 4)]


def _run(env, plan, index=0):
    """Step one prompt's episode with (B, L) = plan[cycle]; returns (cycles, summed reward, observations)."""
    observation, info = env.reset(seed=0, options={"prompt_index": index})
    candidates, cycles, total, seen, done = env.unwrapped.candidates, [], 0.0, [], False
    while not done:
        size, length = plan[len(cycles) % len(plan)]
        observation, reward, done, _, info = env.step(candidates.index(size))
        total += reward
        if info["phase"] == "draft":
            seen.append(observation)
            assert info["action_mask"].tolist() == [b <= size for b in candidates]
            observation, reward, done, _, info = env.step(candidates.index(length))
            total += reward
        cycles.append((info["block_size"], info["verify_length"], info["accepted"]))
    return cycles, total, seen


def test_draft_verify_env_passes_gymnasium_check(verify_store):
    env = gym.make("specpolicy/DraftVerifyStep-v0", sweep=verify_store.path, reward="seconds")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (20 + 2 + 2 * 7,) and env.action_space.n == 4


@pytest.mark.parametrize("index", [0, 3, 5])
def test_two_step_cycles_replay_exactly_and_returns_are_minus_the_modelled_time(verify_store, index):
    env = DraftVerifyStepEnv(sweep=verify_store.path, reward="seconds")
    cycles, total, seen = _run(env, PLAN, index)
    table, costs = env.source.tables[index], env.source.latency
    expected = table.simulate(Plan(lambda s: PLAN[s.cycle % len(PLAN)][0],
                                   lambda s, d: PLAN[s.cycle % len(PLAN)][1]))
    assert cycles == [(c.block_size, c.verify_length, c.accepted) for c in expected]
    assert total == pytest.approx(-costs.cycles_seconds(expected) / costs.ar_seconds)
    assert any(length < size for size, length, _ in cycles)
    for observation in seen:  # the verify-phase observation carries the drafted block's confidences
        size = round(observation[21] * 8)
        confidences = observation[22: 22 + size - 1]
        assert observation[20] == 1 and np.all(confidences > 0) and not observation[22 + size - 1: 29].any()
        np.testing.assert_allclose(observation[29: 29 + size - 1], np.cumprod(confidences), rtol=1e-6)


def test_the_verify_observation_is_the_recorded_block(verify_store):
    env = DraftVerifyStepEnv(sweep=verify_store.path)
    observation, _ = env.reset(seed=0, options={"prompt_index": 1})
    assert observation[20] == 0 and not observation[21:].any()  # draft phase: no block yet
    anchor = env.session.position
    observation, reward, done, _, info = env.step(3)  # B = 8
    assert (reward, done, info["phase"]) == (0.0, False, "draft")
    np.testing.assert_array_equal(observation[22:29],
                                  list(env.source.tables[1].drafted_block(anchor, 8).confidences))


def test_lengths_past_the_block_verify_the_whole_block_and_b1_is_one_step(verify_store):
    env = DraftVerifyStepEnv(sweep=verify_store.path, reward="tokens")
    env.reset(seed=0, options={"prompt_index": 2})
    env.step(2)  # B = 4
    _, reward, _, _, info = env.step(3)  # L = 8 > B
    assert (info["block_size"], info["verify_length"]) == (4, 4) and reward == info["committed"]
    _, _, _, _, info = env.step(0)  # B = 1 finishes its cycle at once
    assert (info["phase"], info["block_size"], info["verify_length"]) == ("verify", 1, 1)


def test_draft_verify_env_needs_a_verify_length_sweep(replay_store):
    with pytest.raises(ValueError, match="--verify-lengths --confidences"):
        DraftVerifyStepEnv(sweep=replay_store.path)


def test_draft_verify_env_runs_live_like_a_bare_decode(test_zoo, prompt_file):
    from specpolicy.data.prompts import encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    pair = load_pair(*map(str, test_zoo))
    env = gym.make("specpolicy/DraftVerifyStepLive-v0", live={"dataset": str(prompt_file), "pair": pair,
                                                              "max_new_tokens": 16, "max_samples": 2,
                                                              "candidates": (1, 2, 4, 8)}).unwrapped
    cycles, total, seen = _run(env, PLAN)
    assert seen and all(obs[20] == 1 for obs in seen)
    prompt = next(p for p in env.source.prompts if p.id == env._prompt_id)
    ids = encode_prompt(pair.tokenizer, prompt, 256)
    bare = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=16).generate(
        ids, Plan(lambda s: PLAN[s.cycle % len(PLAN)][0], lambda s, d: PLAN[s.cycle % len(PLAN)][1]))
    assert cycles == [(c.block_size, c.verify_length, c.accepted) for c in bare.cycles]
    assert total == bare.cycle_tokens


def _threshold_agent(candidates, size=8, threshold=0.5):
    """A hand-written agent on the observation: B = ``size``, then L = 1 + the drafts whose running product
    stays >= ``threshold``, rounded down to a candidate."""
    top = max(candidates)

    def act(observation):
        if observation[20] == 0:
            return candidates.index(size)
        running = observation[21 + top: 21 + 2 * top - 1]
        length = 1 + int(np.sum(running >= threshold))
        return max(i for i, b in enumerate(candidates) if b <= length)

    return act


def test_an_agent_runs_as_a_policy_exactly_as_in_the_env(verify_store, trained_pair):
    """The agent wrapped as a specpolicy policy makes the env's choices in replay and decodes losslessly
    live."""
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.decoding.engine import decode
    from specpolicy.envs import AgentPolicy, AgentSpec
    from specpolicy.evaluation.replay import prompt_observation

    env = DraftVerifyStepEnv(sweep=verify_store.path, reward="seconds")
    agent = _threshold_agent(env.candidates)
    policy = AgentPolicy(agent, AgentSpec("draft_verify", env.candidates, budget=24))
    records = list(verify_store.records())
    cut = 0
    for index, record in enumerate(records):
        observation, _ = env.reset(options={"prompt_index": index})
        done = False
        while not done:
            observation, _, done, _, _ = env.step(agent(observation))
        prompt = prompt_observation(verify_store, record, None)
        replayed = record.table().simulate(policy.plan(prompt))
        assert [(c.block_size, c.verify_length, c.accepted) for c in replayed] == \
            [(c.block_size, c.verify_length, c.accepted) for c in env.session.cycles]
        cut += sum(c.verify_length < c.block_size for c in replayed)
    assert cut > 0
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=24)
    for prompt in ([4, 7, 5, 9], [8, 7, 9, 9]):
        trace = decode(decoder, prompt, policy, prompt_id="live")
        assert trace.output_ids == decoder.generate(prompt, 1).output_ids
        assert any(c.verify_length < c.block_size for c in trace.cycles)
