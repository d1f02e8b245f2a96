"""Plain AR decoding: the baseline's tokens equal speculative decoding's, without hidden states."""

from __future__ import annotations

import pytest
import torch

from specpolicy.decoding import SpeculativeDecoder, plain_decode


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_plain_decode_emits_what_speculative_decoding_emits(trained_pair, temperature):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, max_new_tokens=30)
    for seed, prompt in enumerate(([4, 7, 5, 9], [3, 8], [12, 1, 1, 6, 2])):
        plain = plain_decode(decoder, prompt, seed=seed)
        assert plain.output_ids == decoder.generate(prompt, 16, seed=seed).output_ids
        assert plain.output_ids == decoder.generate(prompt, 1, seed=seed).output_ids
        assert all(c.block_size == 1 and c.draft_seconds == 0 for c in plain.cycles)
        assert plain.cycle_tokens == len(plain.output_ids) - 1


def test_plain_decode_matches_transformers_generate_and_asks_for_no_hidden_states(trained_pair, monkeypatch):
    target, drafter = trained_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=20, stop_token_ids=[])
    prompt = [4, 7, 5, 9]
    reference = target.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False, eos_token_id=None,
                                pad_token_id=0)[0, len(prompt):].tolist()
    asked = []
    forward = type(target).forward

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("output_hidden_states"))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(type(target), "forward", spy)
    assert plain_decode(decoder, prompt).output_ids == reference
    assert asked and not any(asked)
