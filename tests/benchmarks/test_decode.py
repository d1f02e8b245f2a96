"""The decode benchmark runs greedy and sampled, and its AR and speculative outputs agree."""

from __future__ import annotations

import pytest
import torch

from benchmarks.decode import bench_decode
from zoo_build.random_models import make_pair


@pytest.mark.parametrize("temperature", [0.0, pytest.param(1.0, marks=pytest.mark.slow)])
def test_bench_decode_agrees_with_ar_at_any_temperature(temperature):
    target, drafter = make_pair()
    prompts = [torch.randint(5, 90, (12,),
                             generator=torch.Generator().manual_seed(i)).tolist() for i in range(2)]
    result = bench_decode(target, drafter, prompts, block_size=8, max_new_tokens=24, temperature=temperature)
    rows = dict(result.rows())
    assert result.identical_outputs == len(prompts)
    assert rows["temperature"] == f"{temperature:g}"
    assert result.tau >= 1.0 and result.ar_tokens_per_second > 0 and result.hf_generate_tokens_per_second > 0
    # speedup = committed tokens per cycle / cycle cost; the budget can only cut tokens, never add them
    assert 0 < result.speedup <= result.tokens_per_cycle / result.cycle_cost_in_ar_steps * 1.0001


@pytest.mark.slow
def test_bench_decode_with_sampled_drafts_does_not_claim_identical_outputs():
    target, drafter = make_pair()
    prompts = [torch.randint(5, 90, (12,),
                             generator=torch.Generator().manual_seed(i)).tolist() for i in range(2)]
    result = bench_decode(target, drafter, prompts, block_size=8, max_new_tokens=24, temperature=1.0,
                          draft_sampling=True)
    rows = dict(result.rows())
    assert result.identical_outputs is None
    assert rows["prompts with speculative output == AR output"].startswith("n/a")
    assert rows["drafts"].startswith("sampled") and result.tau >= 1.0
