"""Latency tables: measured draft and verify seconds as functions of the block size.

Replay sweeps do not time every counterfactual; they model time from these tables, and the
modelled numbers are always reported apart from measured wall time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable

import torch

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.target import crop_cache, new_cache, target_forward


@torch.inference_mode()
def measure_latency(
    decoder: SpeculativeDecoder, block_sizes: Iterable[int], context_length: int = 256, repeats: int = 7
) -> dict:
    """Median seconds of one drafter pass and one target verify pass per block size.

    Returns ``{"context_length", "repeats", "draft_seconds": {B: s}, "verify_seconds": {B: s}}``
    (``draft_seconds[1] = 0``: B = 1 does not draft).
    """
    target, drafter, device = decoder.target, decoder.drafter, decoder.device
    vocab = target.get_input_embeddings().num_embeddings
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, context_length + 64), generator=generator).to(device)
    cache = new_cache(target)
    _, hidden = target_forward(target, ids[:, :context_length], torch.arange(context_length, device=device)[None],
                               cache, logits_to_keep=1)
    features = drafter.context_features(hidden)
    lm_head, embed = target.get_output_embeddings(), target.get_input_embeddings()
    cached = context_length - 4  # the drafter cache holds all but the last few context positions
    drafter_cache = drafter.new_cache()
    drafter(embed(ids[:, :1]), features[:, :cached], torch.arange(cached + 1, device=device)[None], drafter_cache)
    drafter_cache.crop(cached)
    draft_s: dict[int, float] = {}
    verify_s: dict[int, float] = {}
    for size in sorted({int(b) for b in block_sizes} | {1}):
        verify_times, draft_times = [], []
        block = torch.full((1, size), drafter.mask_token_id, device=device)
        draft_positions = torch.arange(cached, context_length + size, device=device)[None]
        verify_positions = torch.arange(context_length, context_length + size, device=device)[None]
        for _ in range(repeats + 1):  # the first pass warms up and is dropped
            decoder._sync()
            start = time.perf_counter()
            target_forward(target, ids[:, context_length : context_length + size], verify_positions, cache)
            decoder._sync()
            verify_times.append(time.perf_counter() - start)
            crop_cache(cache, context_length)
            if size > 1:
                decoder._sync()
                start = time.perf_counter()
                hidden_block = drafter(embed(block), features[:, cached:], draft_positions, drafter_cache)
                lm_head(hidden_block[:, 1:])
                decoder._sync()
                draft_times.append(time.perf_counter() - start)
                drafter_cache.crop(cached)
        verify_s[size] = statistics.median(verify_times[1:])
        draft_s[size] = statistics.median(draft_times[1:]) if draft_times else 0.0
    return {"context_length": context_length, "repeats": repeats,
            "draft_seconds": {str(b): s for b, s in draft_s.items()},
            "verify_seconds": {str(b): s for b, s in verify_s.items()}}


def modelled_seconds(latency: dict, block_sizes: Iterable[int]) -> float:
    """Modelled decode seconds of cycles with these block sizes."""
    draft, verify = latency["draft_seconds"], latency["verify_seconds"]
    total = 0.0
    for size in block_sizes:
        key = str(int(size))
        if key not in verify:
            raise ValueError(f"latency table has no entry for block size {size}; remeasure with it included")
        total += draft[key] + verify[key]
    return total
