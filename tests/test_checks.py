"""Every registered policy family honours the contract :func:`specpolicy.checks.check_policy` checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specpolicy.checks import PolicyContractError, check_policy
from specpolicy.defaults import CHECK_OBSERVATIONS
from specpolicy.plugins.sklearn_baselines import SklearnPolicy
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.registry import get_registry
from specpolicy.replay.export import SglangConfig, VllmConfig
from tests.plugins.planted import CANDIDATES, VOCAB, planted, small_blockpilot

FAMILIES = [family.name for family in get_registry().unique() if family.distribution == "specpolicy"]
"""the built-in families (a plugin installed on the machine is its author's to check)"""
SKLEARN = ("logreg", "forest", "knn", "gboost")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Folders of trained learned policies and a saved agent, by family (the rest build from their name)."""
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.multioutput import MultiOutputRegressor

    from specpolicy.envs import AgentSpec, save_agent
    from specpolicy.envs.bandit import LinUCB
    from specpolicy.plugins import sklearn_baselines

    folder = tmp_path_factory.mktemp("trained")
    blockpilot = small_blockpilot()
    blockpilot.fit(planted(100, 0), planted(50, 1), epochs=2, lr=3e-3, patience=2)  # weights, not skill
    blockpilot.save(folder / "blockpilot")
    paths = {"blockpilot": folder / "blockpilot", "blockpilot-paper": folder / "blockpilot",
             "blockpilot-guard": folder / "blockpilot"}
    small = {"forest": lambda seed: RandomForestRegressor(n_estimators=10, random_state=seed),
             "gboost": lambda seed: MultiOutputRegressor(HistGradientBoostingRegressor(max_iter=10))}
    with pytest.MonkeyPatch.context() as patch:  # the contract, not skill: small ensembles save and act fast
        patch.setattr(sklearn_baselines, "KINDS", sklearn_baselines.KINDS | small)
        for kind in SKLEARN:
            policy = SklearnPolicy(kind, CANDIDATES)
            policy.fit(planted(60, 0))
            policy.save(folder / kind)
            paths[kind] = folder / kind
    agent = LinUCB(np.zeros(13), np.ones(13), CANDIDATES, "compact")
    agent.b = np.random.default_rng(0).normal(size=agent.b.shape)
    paths["agent"] = save_agent(agent, folder / "agent", spec=AgentSpec("prompt", CANDIDATES, "compact"))
    engines = {"vllm_speculative_config": VllmConfig(15, {1: 7, 2: 3}, "d").to_json(),
               "sglang_args": SglangConfig(16, "d").args()}
    (folder / "engines.json").write_text(json.dumps(engines))
    paths["vllm-config"] = paths["sglang-config"] = folder / "engines.json"
    choices = {f"check:{i}": (4, 16)[i % 2] for i in range(CHECK_OBSERVATIONS)}
    (folder / "choices.json").write_text(json.dumps(choices))
    paths["choices"] = folder / "choices.json"
    return paths


@pytest.mark.parametrize("family", FAMILIES)
def test_every_registered_family_passes_check_policy(family, saved, replay_answers):
    """Every family, the per-cycle oracles on real replay answers, verify rules included."""
    wide = (1, 2, 4, 8, 12, *CANDIDATES, 20, 24, 32)  # covers the zoo's cycle policy's sizes
    registry = get_registry()
    name = {"fixed": "fixed16", "random": "random3"}.get(family, family)
    if family in saved:
        name = f"{family}:{saved[family]}"
    if family in ("oracle-step", "oracle-verify"):
        policy = registry.create(name, (1, 2, 4, 8))  # the verify store's sizes
        observations, answers = replay_answers(policy.candidates)
        check_policy(policy, observations=observations, answers=answers)
        return
    policy = registry.create(name,
                             CANDIDATES if family in ("blockpilot", "blockpilot-paper", *SKLEARN) else wide)
    check_policy(policy, vocab_size=policy.vocabulary() or VOCAB)


@pytest.fixture(scope="module")
def replay_answers(verify_store):
    """(observations, answers) of the verify store's prompts, with their replay tables."""
    from specpolicy.costs import uniform_costs
    from specpolicy.evaluation.replay import prompt_observation

    def make(candidates):
        costs = uniform_costs(candidates, 0.005, per_token=0.1)
        records = list(verify_store.records())
        observations = [prompt_observation(verify_store, r, costs) for r in records]
        return observations, [Answers(r.taus, r.table(), r.training_block_size) for r in records]

    return make



def test_check_policy_catches_a_broken_policy():
    class OutOfRange(Policy):
        def select(self, observation):
            return 99

    with pytest.raises(PolicyContractError, match="not one of its choices"):
        check_policy(OutOfRange(CANDIDATES))



def test_oracles_pass_check_policy_on_a_replay_store(replay_store):
    from specpolicy.evaluation.replay import prompt_observation

    costs = replay_store.latency()
    records = list(replay_store.records())
    observations = [prompt_observation(replay_store, r, costs) for r in records]
    answers = [Answers(r.taus, r.table(), r.training_block_size) for r in records]
    for name in ("oracle", "oracle-step"):
        check_policy(get_registry().create(name, CANDIDATES), observations=observations, answers=answers)


def test_observations_carry_nothing_from_the_future():
    """A deployable policy sees logits, length, id, costs and the serving concurrency: no sweep record, no
    taus (oracles get Answers)."""
    fields = set(PromptObservation.__dataclass_fields__)
    assert fields == {"logits", "prompt_length", "prompt_id", "costs", "concurrency"}



def test_the_documented_minimal_per_cycle_policy_passes_the_checker_and_replays(replay_store):
    """Tutorial 2: a per-cycle policy is `step` plus `per_step = True` (the checker once wanted `select`)."""
    from specpolicy.evaluation.replay import evaluate_replay

    class Shrink(Policy):
        per_step = True

        def step(self, state, observation):
            return 16 if not state.accepted_history or state.accepted_history[-1] > 4 else 4

    policy = Shrink((4, 16))
    check_policy(policy)
    [result] = evaluate_replay(replay_store, [policy])
    assert {b for p in result.prompts for b in p.block_sizes} == {4, 16}


def test_a_policy_with_neither_select_nor_step_is_told_which_to_write():
    with pytest.raises(NotImplementedError,
                       match="must define select .*, step with per_step = True .* or plan"):
        Policy(CANDIDATES).select(PromptObservation(np.zeros(4, np.float32), 3))


def test_a_plan_only_per_cycle_policy_is_complete_everywhere(replay_store):
    """Issue 48: `plan` is the one decision hook. A (B, L) plugin that overrides only `plan` (as the docs
    write one) passes check_policy, select and predict, and replays."""
    from specpolicy.cycles import Plan
    from specpolicy.evaluation.replay import evaluate_replay

    class ShortAfterMiss(Policy):
        def plan(self, observation, answers=None):
            def block(state):
                return 16 if not state.accepted_history or state.accepted_history[-1] > 4 else 4

            return Plan(block, lambda state, drafted: 2, reads_block=False)

    policy = ShortAfterMiss((4, 16))
    check_policy(policy)
    observation = PromptObservation(np.zeros(VOCAB, np.float32), 3)
    assert policy.select(observation) == 16 and policy.step(policy_state(observation), observation) == 16
    actions, _ = policy.predict(np.zeros((2, VOCAB), np.float32))
    assert actions.tolist() == [1, 1]
    [result] = evaluate_replay(replay_store, [ShortAfterMiss(replay_store.candidates)])
    assert result.prompts


def policy_state(observation):
    from specpolicy.state import DecodeState

    return DecodeState.after_prefill(observation.logits, observation.prompt_length)


def test_a_per_cycle_bandit_and_a_draft_verify_agent_pass_the_checker():
    """Issue 48: LinUCB.cycle_policy() and saved per-cycle agents failed select, predict and check_policy."""
    from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec
    from specpolicy.envs.bandit import LinUCB

    bandit = LinUCB(np.zeros(20), np.ones(20), (4, 8, 16), "compact")
    bandit.b[2, -1] = 1.0  # the bias of arm 16: the greedy choice until it has learnt otherwise
    check_policy(bandit.cycle_policy(budget=64))
    both = AgentPolicy(lambda observation: 2, AgentSpec("draft_verify", (1, 2, 8), budget=64), name="dv")
    check_policy(both)
    assert both.select(PromptObservation(np.zeros(VOCAB, np.float32), 3)) == 8


def test_the_vocabulary_hint_names_only_policies_that_exist():
    """The hint kept naming ``probe`` after that rule left: a fix the user could not run."""
    from specpolicy.checks import check_vocabulary

    class OtherVocabulary(Policy):
        def vocabulary(self) -> int:
            return VOCAB + 1

    with pytest.raises(ValueError, match="such as") as refused:
        check_vocabulary([OtherVocabulary(CANDIDATES)], VOCAB, "the sweep")
    suggested = str(refused.value).split("such as ")[1].replace(" or ", ", ").split(", ")
    for name in suggested:
        get_registry().create(name, CANDIDATES)  # each is a registered policy


@pytest.mark.parametrize("given", [None, "fixed16"])
def test_check_policy_refuses_what_is_not_a_policy_in_words(given):
    """Reported: ``check_policy(None)`` and ``check_policy("fixed16")`` raised AttributeError."""
    with pytest.raises(ValueError, match="policy must be a Policy .*create_policy"):
        check_policy(given)
