"""The examples the docstrings once carried, run: small calls with their exact results."""

from __future__ import annotations

from dataclasses import replace

import torch

from specpolicy.checks import check_policy
from specpolicy.cli.common import policy_names
from specpolicy.costs import nearest_context, uniform_costs
from specpolicy.cycles import ConfidentPrefix, CycleRecord, Plan
from specpolicy.decoding.verify import match_verify
from specpolicy.envs.rewards import check_reward
from specpolicy.files import atomic_path
from specpolicy.models.dflash_config import default_target_layer_ids, legacy_rope_fields
from specpolicy.plugins.fixed import FixedPolicy
from specpolicy.replay.export import closest_configs, vllm_schedule


def test_small_calls_give_what_their_docstrings_said():
    check_policy(FixedPolicy(16, (14, 15, 16, 17, 18)))
    assert policy_names("fixed16, llamacpp-pmin:p_min=0.5,n_max=7,oracle") == [
        "fixed16", "llamacpp-pmin:p_min=0.5,n_max=7", "oracle"]
    short, long = (replace(uniform_costs([1, 4]), context_length=n) for n in (256, 1792))
    assert nearest_context([short, long], 1200).context_length == 1792
    assert ConfidentPrefix(0.5).length([0.9, 0.8, 0.2, 0.9]) == 3
    assert ConfidentPrefix(0.7, False).length([0.9, 0.6, 0.9]) == 2
    assert Plan.fixed(16).block_size == 16
    result = match_verify(torch.tensor([[5, 6, 7]]), torch.tensor([[5, 6, 9, 1]]))
    assert (result.accepted.tolist(), result.next_token.tolist()) == ([2], [9])
    assert check_reward("time", "prompt", "replay") == "time"
    assert legacy_rope_fields({"rope_type": "default", "rope_theta": 1e6}) == {"rope_theta": 1000000.0,
                                                                               "rope_scaling": None}
    assert default_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert vllm_schedule({1: 7, 4: 3, 8: 3}) == [[1, 3, 7], [4, 8, 3]]
    vllm, sglang = closest_configs({1: [CycleRecord(16, 3, 4)], 2: [CycleRecord(16, 9, 10)]}, "d")
    assert (vllm.num_speculative_tokens, vllm.per_batch, sglang.block_size) == (15, {}, 16)


def test_atomic_path_renames_the_written_sibling_into_place(tmp_path):
    target = tmp_path / "table.json"
    with atomic_path(target) as tmp:
        tmp.write_text("{}")
    assert target.read_text() == "{}"
    assert list(tmp_path.iterdir()) == [target]
