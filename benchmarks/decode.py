"""Decode benchmark: loop overhead, AR vs speculative tokens/s, and transformers' generate."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from specpolicy.decoding import DecodeTrace, SpeculativeDecoder, plain_decode
from specpolicy.defaults import MAX_NEW_TOKENS, TRAINING_BLOCK_SIZE
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.state import mean_acceptance


@dataclass
class DecodeBenchResult:
    """Aggregates over the benchmark prompts (tokens/s exclude prefill)."""

    prompts: int
    max_new_tokens: int
    block_size: int
    temperature: float
    ar_tokens_per_second: float
    spec_tokens_per_second: float
    hf_generate_tokens_per_second: float
    tau: float
    """mean over prompts of each prompt's tau (the papers' number)"""
    tokens_per_cycle: float
    """acceptance lengths of all prompts' cycles pooled: what tokens/s follows"""
    cycle_cost_in_ar_steps: float
    """mean seconds of one speculative cycle / mean seconds of one AR step"""
    ar_overhead_share: float
    spec_overhead_share: float
    identical_outputs: int | None
    """prompts whose speculative output equals the AR output token for token (None with sampled drafts:
    speculative sampling draws other uniforms, so its samples differ while the distribution is the same)"""
    draft_sampling: bool = False
    threads: int = 0

    @property
    def speedup(self) -> float:
        return self.spec_tokens_per_second / self.ar_tokens_per_second

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("prompts x new tokens", f"{self.prompts} x {self.max_new_tokens}"),
            ("block size", str(self.block_size)),
            ("temperature", f"{self.temperature:g}"),
            ("drafts", "sampled, speculative sampling" if self.draft_sampling else "argmax, exact match"),
            ("threads", str(self.threads)),
            ("plain AR tokens/s (no hidden states)", f"{self.ar_tokens_per_second:.1f}"),
            ("speculative tokens/s", f"{self.spec_tokens_per_second:.1f}"),
            ("transformers generate tokens/s", f"{self.hf_generate_tokens_per_second:.1f}"),
            ("speedup over AR", f"{self.speedup:.2f}x"),
            ("tau (mean over prompts)", f"{self.tau:.2f}"),
            ("tokens per cycle (all cycles pooled)", f"{self.tokens_per_cycle:.2f}"),
            ("cost of one cycle, in AR steps", f"{self.cycle_cost_in_ar_steps:.2f}"),
            ("loop overhead share, AR", f"{100 * self.ar_overhead_share:.1f}%"),
            ("loop overhead share, speculative", f"{100 * self.spec_overhead_share:.1f}%"),
            ("prompts with speculative output == AR output",
             "n/a (sampled drafts)" if self.identical_outputs is None
             else f"{self.identical_outputs}/{self.prompts}"),
        ]


def _overhead(traces: list[DecodeTrace]) -> float:
    decode = sum(t.decode_seconds for t in traces)
    return 1.0 - sum(t.forward_seconds for t in traces) / decode


def _tokens_per_second(traces: list[DecodeTrace]) -> float:
    return sum(t.cycle_tokens for t in traces) / sum(t.decode_seconds for t in traces)


def _seconds_per_cycle(traces: list[DecodeTrace]) -> float:
    return sum(t.decode_seconds for t in traces) / max(1, sum(len(t.cycles) for t in traces))


def _tokens_per_cycle(traces: list[DecodeTrace]) -> float:
    return mean_acceptance([c for t in traces for c in t.cycles])  # pooled over the traces' cycles


@torch.inference_mode()
def _hf_tokens_per_second(target: PreTrainedModel, prompt: list[int], max_new_tokens: int,
                          temperature: float = 0.0) -> float:
    """``generate`` rate (greedy, or sampled at ``temperature``) with prefill removed.

    (time for N tokens - time for 1) / (N - 1).
    """
    ids = torch.tensor([prompt], device=next(target.parameters()).device)
    sampling = {"do_sample": True, "temperature": temperature, "top_k": None,
                "top_p": None} if temperature > 0 \
        else {"do_sample": False}

    def timed(n: int) -> float:
        start = time.perf_counter()
        target.generate(ids, max_new_tokens=n, min_new_tokens=n, **sampling)
        return time.perf_counter() - start

    one = statistics.median(timed(1) for _ in range(3))
    full = timed(max_new_tokens)
    return (max_new_tokens - 1) / max(1e-9, full - one)


def bench_decode(
    target: PreTrainedModel,
    drafter: DFlashDrafter,
    prompts: list[list[int]],
    block_size: int = TRAINING_BLOCK_SIZE,
    max_new_tokens: int = MAX_NEW_TOKENS,
    temperature: float = 0.0,
    draft_sampling: bool = False,
) -> DecodeBenchResult:
    """Decode every prompt with plain AR and at B = ``block_size`` (no stop tokens, full budget), alternating
    which goes first. The AR baseline does the work of transformers' ``generate`` (no hidden states).

    At ``temperature`` > 0 both decodes use the same seed per prompt, so their outputs agree except
    where a position's uniform falls within float rounding (~1e-7) of a CDF boundary: a 16-token verify
    and a 1-token step compute logits with different rounding. The distribution is unchanged.
    ``draft_sampling`` samples the drafts and verifies them with speculative sampling (T > 0 only).
    """
    decoder = SpeculativeDecoder(target, drafter, temperature=temperature, max_new_tokens=max_new_tokens,
                                 stop_token_ids=[], draft_sampling=draft_sampling)
    decoder.generate(prompts[0], block_size, max_new_tokens=8)  # warm-up
    ar: list[DecodeTrace] = []
    spec: list[DecodeTrace] = []
    # alternate the order, so drift in the machine's speed hits both alike
    for i, prompt in enumerate(prompts):
        runs = [lambda p=prompt, s=i: ar.append(plain_decode(decoder, p, seed=s)),
                lambda p=prompt, s=i: spec.append(decoder.generate(p, block_size, seed=s))]
        for run in runs if i % 2 == 0 else runs[::-1]:
            run()
    hf = [_hf_tokens_per_second(target, p, max_new_tokens, temperature) for p in prompts]
    return DecodeBenchResult(
        prompts=len(prompts),
        max_new_tokens=max_new_tokens,
        block_size=block_size,
        temperature=temperature,
        ar_tokens_per_second=_tokens_per_second(ar),
        spec_tokens_per_second=_tokens_per_second(spec),
        hf_generate_tokens_per_second=len(hf) / sum(1 / r for r in hf),
        tau=statistics.mean(t.tau for t in spec),
        tokens_per_cycle=_tokens_per_cycle(spec),
        cycle_cost_in_ar_steps=_seconds_per_cycle(spec) / _seconds_per_cycle(ar),
        ar_overhead_share=_overhead(ar),
        spec_overhead_share=_overhead(spec),
        identical_outputs=None if draft_sampling else sum(a.output_ids == s.output_ids for a,
                                                          s in zip(ar, spec)),
        draft_sampling=draft_sampling,
        threads=torch.get_num_threads(),
    )
