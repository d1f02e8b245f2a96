"""Measure a :class:`~specpolicy.replay.batch_costs.BatchCostTable`: target and drafter passes per batch size
b and length n, in interleaved shuffled rounds, medians kept."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

import torch

from specpolicy.costs import quartile_spread
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.defaults import BATCH_LATENCY_CONTEXT, BATCH_LATENCY_REPEATS
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.sweep.latency import _timer, machine_name, passes


@torch.inference_mode()
def measure_batch_costs(decoder: SpeculativeDecoder, batch_sizes: Sequence[int], lengths: Sequence[int],
                        context_length: int = BATCH_LATENCY_CONTEXT, repeats: int = BATCH_LATENCY_REPEATS,
                        seed: int = 0) -> BatchCostTable:
    """Median seconds of a target pass and a drafter pass for every batch size x per-sequence length."""
    lengths = sorted({int(n) for n in lengths} | {1})
    timed, rng = _timer(decoder), random.Random(seed)
    verify_t = {b: {n: [] for n in lengths} for b in batch_sizes}
    draft_t = {b: {n: [] for n in lengths if n > 1} for b in batch_sizes}
    by_batch = {b: passes(decoder, context_length, max(lengths), seed, b) for b in batch_sizes}
    for _ in range(repeats + 1):  # the first round warms up and is dropped
        order = [(b, n) for b in batch_sizes for n in lengths]
        rng.shuffle(order)
        for b, n in order:
            verify, draft = by_batch[b]
            verify_t[b][n].append(timed(lambda v=verify, k=n: v(k)))
            if n > 1:
                draft_t[b][n].append(timed(lambda d=draft, k=n: d(k)))
    return BatchCostTable(
        verify={b: {n: statistics.median(t[1:]) for n, t in row.items()} for b, row in verify_t.items()},
        draft={b: {n: statistics.median(t[1:]) for n, t in row.items()} for b, row in draft_t.items()},
        threads=torch.get_num_threads(), machine=machine_name(decoder.device),
        dtype=str(next(decoder.target.parameters()).dtype).removeprefix("torch."),
        context_length=context_length,
        spread={b: {n: quartile_spread(t[1:]) for n, t in row.items()} for b, row in verify_t.items()},
    )
