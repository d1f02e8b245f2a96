"""``python -m benchmarks hf``: one policy in two loops, specpolicy's decoder and transformers'
``generate()``.

For every held-out prompt and policy, in an order that rotates per prompt: specpolicy's decoder, then
``generate(..., speculation_type="dflash")`` driven by the same policy through :mod:`specpolicy.hf`,
and for a fixed block size transformers' own DFlash generator at that size (the loop-overhead
reference). Outputs are compared with each other and with plain greedy ``generate``; per-cycle block
sizes, accepted drafts and committed tokens between the two policy-driven loops. Times are whole calls
(prefill included) at the pinned thread count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from specpolicy.costs import CostTable
from specpolicy.evaluation.metrics import cycles_agree, paired_interval, speed_ratio
from specpolicy.policy import Policy


@dataclass
class LoopTimes:
    """Per-prompt new tokens and seconds of one loop."""

    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens.append(tokens)
        self.seconds.append(seconds)

    @property
    def rate(self) -> float:
        return sum(self.tokens) / sum(self.seconds) if self.seconds else float("nan")


@dataclass
class HFBenchRow:
    """One policy over every prompt: agreement counts and the three loops' times."""

    policy: str
    prompts: int = 0
    outputs_equal: int = 0
    greedy_equal: int = 0
    cycles_equal: int = 0
    specpolicy: LoopTimes = field(default_factory=LoopTimes)
    hf_policy: LoopTimes = field(default_factory=LoopTimes)
    hf_plain: LoopTimes = field(default_factory=LoopTimes)

    def overhead(self) -> tuple[float, float, float]:
        """generate()+policy time / transformers' own DFlash time at the same B (pooled), with a paired 95%
        CI."""
        if not self.hf_plain.seconds:
            return float("nan"), float("nan"), float("nan")
        columns = [np.array(self.hf_plain.tokens), np.array(self.hf_plain.seconds),
                   np.array(self.hf_policy.tokens), np.array(self.hf_policy.seconds)]
        low, high = paired_interval(columns, speed_ratio)
        return float(speed_ratio(*columns)), low, high

    def row(self) -> dict[str, str]:
        ratio, low, high = self.overhead()
        n = self.prompts
        return {"policy": self.policy, "same out": f"{self.outputs_equal}/{n}",
                "= greedy": f"{self.greedy_equal}/{n}",
                "same cycles": f"{self.cycles_equal}/{n}", "ours tok/s": f"{self.specpolicy.rate:.0f}",
                "gen tok/s": f"{self.hf_policy.rate:.0f}",
                "plain tok/s": "-" if np.isnan(ratio) else f"{self.hf_plain.rate:.0f}",
                "gen/plain time": "-" if np.isnan(ratio) else f"{ratio:.3f} ({low:.3f}-{high:.3f})"}


def fixed_size(policy: Policy | int) -> int | None:
    """The one block size a policy ever picks (a fixed policy), else ``None``."""
    if isinstance(policy, int):
        return policy
    choices = policy.choices()
    return next(iter(choices)) if not policy.per_step and len(choices) == 1 else None


def _timed(run: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def _plain_dflash(target, assistant, inputs: dict, block_size: int) -> torch.Tensor:
    """transformers' own DFlash generator at ``block_size`` (read from the assistant's config)."""
    saved, assistant.config.block_size = assistant.config.block_size, block_size
    try:
        return target.generate(**inputs, assistant_model=assistant, speculation_type="dflash")
    finally:
        assistant.config.block_size = saved


@torch.inference_mode()
def bench_hf(pair, prompts: Sequence[list[int]], policies: Sequence[Policy | int], names: Sequence[str],
             max_new_tokens: int, costs: CostTable | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> list[HFBenchRow]:
    """Run every prompt through both loops for every policy (see the module docstring);
    ``on_progress(done, total)`` after each prompt."""
    from specpolicy import hf
    from specpolicy.decoding import SpeculativeDecoder

    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=max_new_tokens)
    assistant = hf.to_transformers_assistant(pair.drafter)
    rows = [HFBenchRow(name) for name in names]
    decoder.generate(prompts[0], 4, max_new_tokens=8)  # warm-up
    for n, ids in enumerate(prompts):
        tensor = torch.tensor([ids], device=decoder.device)
        inputs = {"input_ids": tensor, "attention_mask": torch.ones_like(tensor), "do_sample": False,
                  "max_new_tokens": max_new_tokens}
        greedy = pair.target.generate(**inputs)[0, len(ids):].tolist()
        for row, policy in zip(rows, policies):
            runs = _runs(decoder, pair.target, assistant, policy, ids, inputs, costs)
            shift = n % len(runs)
            results = {name: _timed(run) for name, run in runs[shift:] + runs[:shift]}
            _score(row, results, greedy, len(ids))
        if on_progress is not None:
            on_progress(n + 1, len(prompts))
    return rows


def _runs(decoder, target, assistant, policy: Policy | int, ids: list[int], inputs: dict,
          costs: CostTable | None) -> list[tuple[str, Callable[[], object]]]:
    """The loops one policy runs on one prompt: specpolicy's, generate() with the policy, and (fixed B)
    transformers' own DFlash generator."""
    from specpolicy import hf
    from specpolicy.decoding.engine import decode

    def ours():
        if isinstance(policy, int):
            return decoder.generate(ids, policy)
        return decode(decoder, ids, policy, prompt_id="bench", costs=costs)

    runs = [("ours", ours),
            ("theirs", lambda: hf.generate(target, assistant, policy, costs=costs, **inputs))]
    if (size := fixed_size(policy)) is not None:
        runs.append(("plain", lambda: _plain_dflash(target, assistant, inputs, size)))
    return runs


def _score(row: HFBenchRow, results: dict, greedy: list[int], prompt_length: int) -> None:
    (trace, ours_s), (generation, theirs_s) = results["ours"], results["theirs"]
    output = generation.sequences[0, prompt_length:].tolist()
    row.prompts += 1
    row.outputs_equal += output == trace.output_ids
    row.greedy_equal += output == greedy
    row.cycles_equal += cycles_agree(generation.cycles, trace.cycles)[2] is None
    row.specpolicy.add(len(trace.output_ids), ours_s)
    row.hf_policy.add(len(output), theirs_s)
    if "plain" in results:
        plain, plain_s = results["plain"]
        row.hf_plain.add(plain.shape[1] - prompt_length, plain_s)
