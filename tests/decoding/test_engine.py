"""A policy decoded live: oracles are refused by their own plan, whichever engine entry a caller uses."""

from __future__ import annotations

import pytest

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.engine import decode
from specpolicy.policy import Policy
from specpolicy.registry import create_policy


@pytest.mark.parametrize("name", ["oracle", "oracle-tau", "oracle-step", "oracle-verify"])
def test_an_oracle_decoded_live_is_refused_with_the_replay_hint(trained_pair, name):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=6)
    with pytest.raises(ValueError, match="replay"):
        decode(decoder, [4, 7, 5], create_policy(name, (1, 2, 4)))


class _Stray(Policy):
    """Chooses 7 on its second cycle, though its candidates are 4 and 8."""

    name, per_step = "stray", True

    def step(self, state, observation):
        return 7 if state.cycle == 1 else 4


class _StrayFixed(Policy):
    """Picks 7 for the whole prompt, though its candidates are 4 and 8."""

    name = "stray-fixed"

    def select(self, observation):
        return 7


def test_every_engine_refuses_a_block_size_outside_the_policys_choices_naming_it(trained_pair, replay_store):
    """Reproduced first: live decoding ran B = 7 silently; replay refused it without naming the policy."""
    from specpolicy.evaluation.replay import evaluate_replay

    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=12, stop_token_ids=[])
    with pytest.raises(ValueError, match="policy 'stray' chose block size 7, which is not among its choices"):
        decode(decoder, [4, 7, 5], _Stray((4, 8)))
    with pytest.raises(ValueError, match="policy 'stray' chose block size 7"):
        evaluate_replay(replay_store, [_Stray((4, 8))])
    with pytest.raises(ValueError, match="policy 'stray-fixed' chose block size 7"):
        evaluate_replay(replay_store, [_StrayFixed((4, 8))])


def test_a_checked_fixed_plan_stays_a_fixed_plan_so_replay_reuses_the_cycles_of_its_size():
    import numpy as np

    from specpolicy.policy import PromptObservation

    observation = PromptObservation(np.zeros(4, dtype=np.float32), 3)
    assert create_policy("fixed8", (4, 8)).checked_plan(observation).always == 8
    assert create_policy("heuristic", (4, 8)).checked_plan(observation).always is None
    assert _StrayFixed((4, 8)).checked_plan(observation).always is None  # refused at its first cycle
