"""The cost twin against the tiny pair it enlarges: on a sweep's prompts (the main job's, held out), the
twin's live greedy outputs and every cycle's accepted drafts against what the tiny pair recorded and replays
(the costs of both: ``specpolicy bench latency --target twin --drafter twin``; in llama.cpp ``compare
--engine``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specpolicy.cycles import Plan
from specpolicy.sweep.records import SweepRecord


@dataclass
class TwinFidelity:
    prompts: int = 0
    outputs_differ: list[str] = field(default_factory=list)
    cycles_differ: list[str] = field(default_factory=list)
    cycles: int = 0
    first_differences: list[str] = field(default_factory=list)
    """per differing prompt: where the outputs part, and the twin's top-two logit margin there"""

    def rows(self) -> list[dict[str, object]]:
        return [{"check": "prompts", "value": self.prompts},
                {"check": "cycles compared", "value": self.cycles},
                {"check": "outputs differing from the tiny pair's", "value": len(self.outputs_differ)},
                {"check": "prompts with a cycle whose accepted drafts differ",
                 "value": len(self.cycles_differ)},
                *({"check": "difference", "value": line} for line in self.first_differences)]


def bench_twin(records: Sequence[SweepRecord], target: str, drafter: str, block_sizes: Sequence[int] = (16,),
               on_progress: Callable[[int, int], None] | None = None) -> TwinFidelity:
    """Decode every prompt of a replay sweep's ``records`` with the twin (``target``, ``drafter``) at each of
    ``block_sizes`` (float32, live) and compare with its recorded output and its replay, cycle for cycle."""
    import torch

    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    pair = load_pair(target, drafter, "float32", "cpu")
    decoder = SpeculativeDecoder(pair.target, pair.drafter)
    result = TwinFidelity()
    for n, record in enumerate(records, start=1):
        table = record.table()
        prompt = list(table.sequence[:table.prompt_length])
        recorded = list(table.sequence[table.prompt_length:][:table.output_length])
        for size in block_sizes:
            trace = decoder.generate(prompt, size, max_new_tokens=table.budget)
            replayed = [c.accepted for c in table.simulate(Plan.fixed(size))]
            result.cycles += len(replayed)
            if trace.output_ids != recorded:
                result.outputs_differ.append(record.prompt_id)
                pairs = enumerate(zip(trace.output_ids, recorded))
                at = next((i for i, (a, b) in pairs if a != b), None)
                with torch.no_grad():  # how near a tie the twin's logits are where it parts from the tiny
                    margin = "-" if at is None else _top_two_margin(pair.target, prompt + recorded[:at])
                result.first_differences.append(f"{record.prompt_id} at B = {size}: token {at}, top-two "
                                                f"logit margin {margin}")
            if [c.accepted for c in trace.cycles] != replayed:
                result.cycles_differ.append(record.prompt_id)
        result.prompts += 1
        if on_progress:
            on_progress(n, len(records))
    return result


def _top_two_margin(target, ids: list[int]) -> str:
    """The twin's gap between its two largest next-token logits after ``ids`` (a near-tie: float32 sums in
    another order may swap them)."""
    import torch

    logits = target(torch.tensor([ids])).logits[0, -1]
    top = torch.topk(logits, 2).values
    return f"{float(top[0] - top[1]):.2e}"
