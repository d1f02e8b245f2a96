"""Bad input fails early with a message that names the problem."""

from __future__ import annotations

import pytest

from specpolicy.cycles import Plan
from specpolicy.decoding import SpeculativeDecoder


@pytest.fixture()
def decoder(random_pair):
    target, drafter = random_pair
    return SpeculativeDecoder(target, drafter, max_new_tokens=8)


def test_empty_prompt(decoder):
    with pytest.raises(ValueError, match="empty prompt"):
        decoder.generate([], 4)


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_block_size_below_one_or_not_integer(decoder, size):
    with pytest.raises(ValueError, match=r"block size must be an integer in 1\.\.64"):
        decoder.generate([5, 6], size)


def test_callback_returning_bad_block_size(decoder):
    with pytest.raises(ValueError, match="block size"):
        decoder.generate([5, 6], Plan(lambda state: 0))


def test_prompt_longer_than_context(decoder):
    limit = decoder.max_positions
    with pytest.raises(ValueError, match=f"context of {limit} positions"):
        decoder.generate([5] * (limit + 1), 4)


def test_token_ids_out_of_vocabulary(decoder):
    with pytest.raises(ValueError, match=r"prompt token ids must lie in \[0, 97\)"):
        decoder.generate([5, 97], 4)


def test_bad_sampling_settings(random_pair):
    target, drafter = random_pair
    with pytest.raises(ValueError, match="temperature"):
        SpeculativeDecoder(target, drafter, temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        SpeculativeDecoder(target, drafter, temperature=1, top_p=0)
    with pytest.raises(ValueError, match="draft_sampling needs temperature > 0"):
        SpeculativeDecoder(target, drafter, draft_sampling=True)


def test_context_end_stops_cleanly(random_pair):
    target, drafter = random_pair
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=400, stop_token_ids=[])
    trace = decoder.generate([5] * 500, 16)
    assert trace.stop_reason == "context"


def test_every_engine_refuses_a_block_size_above_the_limit(trained_pair):
    """One check for every entry point: the decoder, a plan, a session (sweeps refused > 64 alone before)."""
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=4)
    with pytest.raises(ValueError, match=r"block size must be an integer in 1\.\.64"):
        decoder.generate([5, 6], 10_000)
    with pytest.raises(ValueError, match=r"1\.\.64"):
        decoder.start([5, 6]).step(65)
    with pytest.raises(ValueError, match=r"1\.\.64"):
        Plan.fixed(65)


@pytest.mark.parametrize("top_k", [-1, 2.5, True])
def test_a_negative_or_fractional_top_k_is_refused(random_pair, top_k):
    """Issue 48: top_k=-1 ended in a torch traceback at the first sampled token."""
    target, drafter = random_pair
    with pytest.raises(ValueError, match=r"top_k \(0 keeps every token\) must be an integer >= 0"):
        SpeculativeDecoder(target, drafter, temperature=1.0, top_k=top_k)


@pytest.mark.parametrize(("prompt", "message"), [
    ("hello", r"prompt_ids must be token ids, got text; encode it first"),  # torch: "invalid data type"
    ([5.7, 6.2], r"prompt token ids must be integers, got torch\.float"),  # read as [5, 6]
    ([True, False], r"prompt token ids must be integers, got torch\.bool"),  # read as [1, 0]
])
def test_a_prompt_that_is_not_token_ids_is_refused(decoder, prompt, message):
    with pytest.raises(ValueError, match=message):
        decoder.generate(prompt, 4)


def test_a_decoder_without_a_model_is_refused_where_it_is_built(random_pair):
    """Reproduced: SpeculativeDecoder(None, drafter) raised AttributeError ('config'); (target, None) was
    accepted and failed at the first draft."""
    target, drafter = random_pair
    with pytest.raises(ValueError, match=r"target must be a Module \(load_pair\(target, drafter\)\.target\)"):
        SpeculativeDecoder(None, drafter)
    with pytest.raises(ValueError, match=r"drafter must be a DFlashDrafter \(load_pair"):
        SpeculativeDecoder(target, None)
