"""Mixed-size blocks over a shared context cache draft exactly what one block at a time does."""

from __future__ import annotations

import torch

from specpolicy.models.blocks import draft_mixed_blocks
from specpolicy.models.target import new_cache, target_forward
from zoo_build.drafter_loss import draft_anchor_blocks
from zoo_build.random_models import make_pair


def _sequence(length: int, seed: int):
    """A random pair, token ids [1, length] and the target features [1, length, L*H] the drafter reads."""
    target, drafter = make_pair()
    ids = torch.randint(4, 90, (1, length), generator=torch.Generator().manual_seed(seed))
    _, hidden = target_forward(target, ids, torch.arange(length).unsqueeze(0), new_cache(target))
    return target, drafter, ids, drafter.context_features(hidden)


@torch.inference_mode()
def test_mixed_blocks_match_single_size_passes_and_leave_the_cache_as_it_was():
    target, drafter, ids, context = _sequence(40, seed=0)
    cache = drafter.new_cache()
    drafter.cache_context(context, torch.arange(40).unsqueeze(0), cache)
    anchors, sizes = torch.tensor([5, 9, 9, 30]), torch.tensor([4, 4, 7, 2])
    mixed = draft_mixed_blocks(drafter, target, ids[0], cache, anchors, sizes)
    assert mixed.shape == (4, 7, drafter.hidden_size) and len(cache) == 40
    for n, (anchor, size) in enumerate(zip(anchors.tolist(), sizes.tolist())):
        single = draft_anchor_blocks(drafter, target, ids, context, torch.tensor([[anchor]]), size)[0, 0]
        torch.testing.assert_close(mixed[n, :size], single, atol=1e-5, rtol=1e-4)
        assert not mixed[n, size:].any()
    again = draft_mixed_blocks(drafter, target, ids[0], cache, anchors, sizes)
    torch.testing.assert_close(again, mixed)


@torch.inference_mode()
def test_cache_context_holds_what_a_drafting_pass_leaves_behind():
    target, drafter, _, context = _sequence(12, seed=1)
    cached = drafter.new_cache()
    drafter.cache_context(context[:, :7], torch.arange(7).unsqueeze(0), cached)
    drafter.cache_context(context[:, 7:], torch.arange(7, 12).unsqueeze(0), cached)
    drafted = drafter.new_cache()
    block = target.get_input_embeddings()(torch.full((1, 4), drafter.mask_token_id))
    drafter(block, context, torch.arange(16).unsqueeze(0), drafted)
    drafted.crop(12)
    assert len(cached) == len(drafted) == 12
    for layer in range(len(drafter.layers)):
        torch.testing.assert_close(cached.keys[layer], drafted.keys[layer], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(cached.values[layer], drafted.values[layer], atol=1e-5, rtol=1e-4)
