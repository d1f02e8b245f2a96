"""Property tests: verification never changes the target's output."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.cycles import Plan
from specpolicy.decoding import SpeculativeDecoder

PAIRS = ["random_pair", "trained_pair"]


def prompts(vocab: int):
    return st.lists(st.integers(min_value=1, max_value=vocab - 1), min_size=1, max_size=12)


def schedule(sizes: list[int]) -> Plan:
    cycle = itertools.cycle(sizes)
    return Plan(lambda state: next(cycle))


def hf_greedy(target, prompt: list[int], max_new_tokens: int) -> list[int]:
    out = target.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("pair_name", PAIRS)
@given(data=st.data(), block_size=st.integers(1, 32), max_new=st.integers(1, 48))
def test_greedy_equals_target_greedy_and_hf_generate(request, pair_name, data, block_size, max_new):
    target, drafter = request.getfixturevalue(pair_name)
    prompt = data.draw(prompts(target.config.vocab_size))
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=max_new)
    speculative = decoder.generate(prompt, block_size).output_ids
    autoregressive = decoder.generate(prompt, 1).output_ids
    assert speculative == autoregressive
    assert speculative == hf_greedy(target, prompt, max_new)


@pytest.mark.parametrize("pair_name", PAIRS)
@given(data=st.data(), sizes=st.lists(st.integers(1, 32), min_size=1, max_size=8), max_new=st.integers(1, 48))
def test_per_cycle_block_sizes_keep_greedy_output(request, pair_name, data, sizes, max_new):
    target, drafter = request.getfixturevalue(pair_name)
    prompt = data.draw(prompts(target.config.vocab_size))
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=max_new)
    trace = decoder.generate(prompt, schedule(sizes))
    assert trace.output_ids == decoder.generate(prompt, 1).output_ids
    used = [c.block_size for c in trace.cycles]
    assert used == [s for s, _ in zip(itertools.cycle(sizes), used)]


@given(data=st.data(), sizes=st.lists(st.integers(1, 32), min_size=1, max_size=6), seed=st.integers(0, 2**16),
       temperature=st.sampled_from([0.5, 1.0, 1.5]), top_k=st.sampled_from([0, 5]),
       top_p=st.sampled_from([1.0, 0.8]))
def test_sampling_output_is_block_size_invariant_given_seed(trained_pair, data, sizes, seed, temperature,
                                                            top_k,
                                                            top_p):
    """With positional uniforms, T > 0 decoding emits the target's own samples whatever the schedule."""
    target, drafter = trained_pair
    prompt = data.draw(prompts(target.config.vocab_size))
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, top_k=top_k, top_p=top_p,
                                 max_new_tokens=40)
    reference = decoder.generate(prompt, 1, seed=seed).output_ids
    assert decoder.generate(prompt, schedule(sizes), seed=seed).output_ids == reference


@pytest.mark.parametrize("pair_name", PAIRS)
@given(data=st.data(), sizes=st.lists(st.integers(1, 32), min_size=1, max_size=6), max_new=st.integers(1, 48),
       temperature=st.sampled_from([0.0, 1.0]), draft_sampling=st.booleans())
def test_trace_invariants(request, pair_name, data, sizes, max_new, temperature, draft_sampling):
    target, drafter = request.getfixturevalue(pair_name)
    prompt = data.draw(prompts(target.config.vocab_size))
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, max_new_tokens=max_new,
                                 draft_sampling=draft_sampling and temperature > 0)
    trace = decoder.generate(prompt, schedule(sizes))
    assert 1 + sum(c.committed for c in trace.cycles) == len(trace.output_ids) <= max_new
    for cycle in trace.cycles:
        assert 0 <= cycle.accepted <= cycle.block_size - 1
        assert 1 <= cycle.committed <= min(cycle.block_size, cycle.accepted + 1)
    assert trace.prompt_ids == prompt
    if trace.stop_reason == "stop_token":
        assert trace.output_ids[-1] in decoder.stop_token_ids
        assert not set(trace.output_ids[:-1]) & set(decoder.stop_token_ids)
    elif trace.stop_reason == "max_new_tokens":
        assert len(trace.output_ids) == max_new
    # tau as Spec-Bench and vLLM count it: the tokens each cycle kept, the cut last one included
    if trace.cycles:
        assert trace.tau == pytest.approx((len(trace.output_ids) - 1) / len(trace.cycles))


def test_trained_drafter_gets_drafts_accepted(trained_pair):
    """A drafter distilled on its target must beat one-token-per-cycle decoding (catches RoPE/context
    bugs)."""
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=60, stop_token_ids=[])
    taus = [decoder.generate([4 + i, 7, 9, 5 + i], 8).tau for i in range(6)]
    assert sum(taus) / len(taus) > 2.0


def test_mask_token_committed_is_kept(trained_pair):
    """A committed token equal to the mask id stays in the output (the reference loop dropped it)."""
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=60, stop_token_ids=[])
    found = False
    for first in range(1, 16):
        out = decoder.generate([first, 2, first], 4).output_ids
        assert out == decoder.generate([first, 2, first], 1).output_ids
        found |= drafter.mask_token_id in out
        if found:
            break
    assert found, "no prompt produced the mask id; pick prompts that do"
