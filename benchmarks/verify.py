"""``python -m benchmarks verify``: (B, L) replay against live decoding, cycle for cycle, per policy.

Each held-out prompt gets one ``--verify-lengths`` replay with confidences; each policy then decodes
it live (its block sizes and verify rule run on the models) and in replay (reading the recorded
confidences), and every cycle's block size, verify length, accepted drafts and committed tokens are
compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specpolicy.costs import CostTable
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.engine import decode
from specpolicy.evaluation.metrics import cycle_rows, cycles_agree
from specpolicy.features import to_numpy
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.sweep.replay import build_replay


@dataclass
class VerifyAgreement:
    """One policy over every prompt: cycles compared and equal, and the first differences."""

    policy: str
    compared: int = 0
    agreeing: int = 0
    cut: int = 0
    """cycles whose verify length was below their block size"""
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict[str, str]:
        share = 100 * self.agreeing / max(1, self.compared)
        return {"policy": self.policy, "cycles equal": f"{self.agreeing}/{self.compared} = {share:.1f}%",
                "cut blocks (L < B)": str(self.cut)}


def bench_verify(decoder: SpeculativeDecoder, prompts: Sequence[list[int]], candidates: Sequence[int],
                 policies: Sequence[Policy], costs: CostTable, max_new_tokens: int,
                 on_progress: Callable[[int, int], None] | None = None) -> list[VerifyAgreement]:
    """Compare every policy's live and replayed cycles on every prompt (see the module docstring)."""
    drafted = [b for b in candidates if b > 1]
    results = [VerifyAgreement(p.name) for p in policies]
    for n, ids in enumerate(prompts):
        table, trace = build_replay(decoder, ids, candidates, max_new_tokens=max_new_tokens,
                                    verify_lengths=True,
                                    confidence_sizes=drafted)
        logits = to_numpy(trace.prefill_logits.float())
        for policy, result in zip(policies, results):
            live = decode(decoder, ids, policy, prompt_id="bench", costs=costs, max_new_tokens=max_new_tokens)
            observation = PromptObservation(logits, len(ids), "bench", costs)
            replayed = table.simulate(policy.plan(observation, Answers(table.taus(), table)),
                                      trace.prefill_logits)
            same, compared, first = cycles_agree(live.cycles, replayed)
            result.compared += compared
            result.agreeing += same
            result.cut += sum(c.verify_length < c.block_size for c in live.cycles)
            if first is not None and len(result.notes) < 5:
                result.notes.append(f"prompt {n} cycle {first}: live "
                                    f"{cycle_rows(live.cycles[first:first + 1])} vs "
                                    f"replay {cycle_rows(replayed[first:first + 1])}")
        if on_progress:
            on_progress(n + 1, len(prompts))
    return results
