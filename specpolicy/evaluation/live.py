"""Policies decoded live beside plain AR, in an order that rotates per prompt (measured time)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specpolicy.costs import CostTable
from specpolicy.decoding import SpeculativeDecoder, plain_decode
from specpolicy.decoding.engine import decode
from specpolicy.evaluation.metrics import PolicyResults, PromptResult
from specpolicy.policy import Policy


def evaluate_live(
    decoder: SpeculativeDecoder,
    prompts: Sequence[tuple[str, list[int]]],
    policies: Sequence[Policy],
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
    costs: CostTable | None = None,
) -> list[PolicyResults]:
    """Decode every prompt with plain AR and every policy, order rotated per prompt; speedups divide by plain
    AR of the same prompt. ``costs``: the table cost-aware policies read."""
    results = [PolicyResults(p.name, "measured") for p in policies]
    for n, (prompt_id, ids) in enumerate(prompts):
        runners = [None, *range(len(policies))]  # None = plain AR
        shift = n % len(runners)
        traces = {}
        for which in runners[shift:] + runners[:shift]:
            if which is None:
                traces[which] = plain_decode(decoder, ids, seed=seed)
            else:
                traces[which] = decode(decoder, ids, policies[which], prompt_id=prompt_id, costs=costs,
                                       seed=seed)
        ar = traces[None]
        for i, result in enumerate(results):
            trace = traces[i]
            ar_seconds = ar.decode_seconds * trace.cycle_tokens / max(1, ar.cycle_tokens)
            result.prompts.append(PromptResult(prompt_id, [c.block_size for c in trace.cycles], trace.tau,
                                               trace.cycle_tokens, trace.decode_seconds, ar_seconds,
                                               cycles=len(trace.cycles)))
        if on_progress:
            on_progress(n + 1, len(prompts))
    return results
