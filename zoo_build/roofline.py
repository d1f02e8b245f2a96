"""A synthetic batch cost table from a roofline model of a named GPU: modelled, never measured, and labelled
so.

Builds the shipped ``batch-costs-h200-synthetic.json`` (``python -m zoo_build roofline``). For concurrencies
past what this machine measures (``specpolicy bench batch-latency`` times batches of the tiny pair on the
CPU), :func:`roofline_batch_costs` prices one pass over b sequences of n new tokens, each after ``context``
tokens, as the larger of its memory time and its compute time:

- memory: the weights, read once per pass (bf16), plus the KV cache of b x (context + n) positions;
- compute: 2 FLOPs per weight per token, plus attention's 4 x layers x q-width FLOPs per token per position.

Both come from the model's Hugging Face config; peaks are the GPU's datasheet figures (no efficiency factor).
A DFlash drafter pass runs its own layers and ``fc`` and reads the target's LM head over the block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specpolicy.replay.batch_costs import BatchCostTable
from zoo_build import DFLASH_DRAFTER_LAYERS, ROOFLINE_CONTEXT


@dataclass(frozen=True)
class Gpu:
    name: str
    bandwidth: float
    """bytes per second of memory bandwidth"""
    flops: float
    """dense bf16 FLOPs per second"""


GPUS = {"H200": Gpu("NVIDIA H200 SXM (datasheet: 4.8 TB/s, 989 dense bf16 TFLOPS)", 4.8e12, 989e12),
        "H100": Gpu("NVIDIA H100 SXM (datasheet: 3.35 TB/s, 989 dense bf16 TFLOPS)", 3.35e12, 989e12)}

QWEN3_4B = {"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936}
"""the public Qwen/Qwen3-4B config.json's shapes (z-lab/Qwen3-4B-DFlash-b16 has 5 such layers)"""


@dataclass(frozen=True)
class PassShape:
    """What one pass reads and computes: weights it multiplies (``params``), KV bytes per position, and the
    attention width (``q_width`` x ``layers``)."""

    params: float
    kv_bytes_per_position: float
    layers: int
    q_width: int

    @classmethod
    def of(cls, config: Mapping[str, int], layers: int | None = None, extra_params: float = 0.0) -> PassShape:
        """From a config: ``layers`` of it (default: all), plus the LM head and ``extra_params``."""
        h, n = config["hidden_size"], layers or config["num_hidden_layers"]
        q = config["num_attention_heads"] * config["head_dim"]
        kv = config["num_key_value_heads"] * config["head_dim"]
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * config["intermediate_size"]
        return cls(n * per_layer + config["vocab_size"] * h + extra_params, n * 2 * kv * 2, n, q)

    def seconds(self, gpu: Gpu, batch: int, tokens: int, context: int) -> float:
        """One pass over ``batch`` sequences of ``tokens`` new tokens after ``context`` cached positions."""
        new, positions = batch * tokens, batch * (context + tokens)
        memory = (2 * self.params + self.kv_bytes_per_position * positions) / gpu.bandwidth
        flops = 2 * self.params * new + 4 * self.layers * self.q_width * new * (context + tokens)
        compute = flops / gpu.flops
        return max(memory, compute)


def roofline_batch_costs(gpu: str = "H200", config: Mapping[str, int] = QWEN3_4B,
                         drafter_layers: int = DFLASH_DRAFTER_LAYERS,
                         batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
                         lengths: Sequence[int] = (1, 2, 4, 8, 16, 32),
                         context: int = ROOFLINE_CONTEXT) -> BatchCostTable:
    """The synthetic :class:`BatchCostTable` of ``config``'s target and a DFlash drafter of ``drafter_layers``
    on ``gpu`` (a key of :data:`GPUS`); its ``machine`` says it is synthetic and how it was made."""
    if gpu not in GPUS:
        raise ValueError(f"no roofline figures for GPU {gpu!r}; known: {', '.join(GPUS)}")
    device, h = GPUS[gpu], config["hidden_size"]
    target = PassShape.of(config)
    drafter = PassShape.of(config, drafter_layers, extra_params=drafter_layers * h * h)  # + fc
    verify = {b: {n: target.seconds(device, b, n, context) for n in lengths} for b in batches}
    draft = {b: {n: drafter.seconds(device, b, n, context) for n in lengths} for b in batches}
    machine = (f"synthetic roofline, not measured: {device.name}; target {config['num_hidden_layers']} "
               f"layers x "
               f"{h} hidden, drafter {drafter_layers} layers, bf16, context {context}")
    return BatchCostTable(verify, draft, None, machine, "bfloat16", context)
