"""What serving engines read, from a policy's simulated choices (no torch).

Engines run DFlash at one static size per batch size; they do not separate the drafter's block B
from the verify length L (they verify all they draft). A policy's choices at each concurrency,
from :func:`~specpolicy.evaluate.evaluate_serving`, export as:

- **vLLM** ``speculative_config``: ``num_speculative_tokens`` = verified drafts K = L - 1 at batch 1,
  and ``num_speculative_tokens_per_batch_size`` = ``[[start_bs, end_bs, K], ...]`` (Dynamic SD),
  K the token-weighted median of the policy's L - 1 at that concurrency (0 turns speculation off).
- **SGLang** ``--speculative-num-draft-tokens`` = the block size, anchor included (B = K + 1), at batch 1:
  SGLang has no per-batch-size schedule.

A per-cycle policy becomes a static table: what it gains by changing B or L within a decode, or by
drafting more than it verifies, is lost in the export; the simulation numbers say how much.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specpolicy.cycles import CycleRecord


def verified_drafts(cycles: Sequence[CycleRecord]) -> int:
    """K: the drafts the policy verified per cycle (L - 1), median over its output tokens (each cycle
    weighs the tokens it committed, so the cycles that produce the output decide, not the many cheap ones).

    >>> verified_drafts([CycleRecord(1, 0, 1)] * 3 + [CycleRecord(16, 7, 8, verified=8)])
    7
    """
    weighted = sorted((c.verify_length - 1, c.committed) for c in cycles)
    half, running = sum(w for _, w in weighted) / 2, 0
    for drafts, weight in weighted:
        running += weight
        if running >= half:
            return drafts
    return 0


def vllm_schedule(drafts_by_batch: Mapping[int, int]) -> list[list[int]]:
    """``{batch size: K}`` -> vLLM's ``[[start_bs, end_bs, K], ...]``: each simulated batch size's K holds up to
    the next simulated one, and runs of equal K merge."""
    sizes = sorted(drafts_by_batch)
    ranges: list[list[int]] = []
    for batch, end in zip(sizes, [*(b - 1 for b in sizes[1:]), sizes[-1]]):
        k = drafts_by_batch[batch]
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = end
        else:
            ranges.append([batch, end, k])
    return ranges


def vllm_config(drafts_by_batch: Mapping[int, int], drafter: str) -> dict:
    """A vLLM ``--speculative-config`` for DFlash with the policy's per-batch-size K."""
    first = drafts_by_batch[min(drafts_by_batch)]
    return {"method": "dflash", "model": drafter, "num_speculative_tokens": max(first, 1),
            "num_speculative_tokens_per_batch_size": vllm_schedule(drafts_by_batch)}


def sglang_args(drafts_by_batch: Mapping[int, int]) -> list[str]:
    """SGLang's DFlash size flag at the policy's batch-1 choice (B = K + 1; K = 0: run without speculation)."""
    first = drafts_by_batch[min(drafts_by_batch)]
    return ["--speculative-num-draft-tokens", str(first + 1)]
