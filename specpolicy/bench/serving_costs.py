"""Serving cost tables of datacenter GPUs composed by NVIDIA's aiconfigurator from its measured operator tables
(``pip install 'specpolicy[aiconfigurator]'``; no GPU, no network). No roofline of ours: every number is its
estimator's ``decode_step_per_op`` of one engine step.

How a step is taken apart: aiconfigurator prices a decode step with ``nextn`` MTP drafts as every operator of the
model scaled by (layers + nextn) / layers over requests x (nextn + 1) tokens (``models.helpers.mtp_scale_factor``).
Divided by that factor, the step is the target alone verifying nextn + 1 tokens per request: ``verify[b][n]``.
Its operators split into the decoder layers' and the head's (embedding, LM head), which price a drafter at its own
shapes: a DFlash drafter (block) runs its layers and the target's LM head once over the block; an EAGLE-3 head
(chain) runs one decoder layer and the LM head once per drafted position (the full vocabulary: an upper bound for
heads with a reduced draft vocabulary). The DFlash ``fc`` projection of the context features is not priced
(one hidden x hidden GEMM per block).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources

from specpolicy.defaults import SERVING_BATCHES, SERVING_LENGTHS
from specpolicy.replay.batch_costs import BatchCostTable

HEAD_OPS = ("generation_embedding", "generation_logits_gemm")
"""aiconfigurator's operators outside the decoder layers (the rest of a step is its layers')"""


@dataclass(frozen=True)
class Drafter:
    kind: str
    """``block`` or ``chain`` (:data:`~specpolicy.defaults.DRAFTER_KINDS`)"""
    layers: int
    about: str


DRAFTERS = {
    "dflash": Drafter("block", 5, "DFlash drafter: 5 decoder layers and the target's LM head, one pass per block"),
    "eagle3": Drafter("chain", 1, "EAGLE-3 head: one decoder layer and the LM head per drafted position"),
}


@dataclass(frozen=True)
class Step:
    """One priced step of the target: its decoder layers' seconds and its head's (embedding + LM head)."""

    layers: float
    head: float

    def drafter(self, target_layers: int, drafter_layers: int) -> float:
        """A drafter of ``drafter_layers`` such layers at the same shape, with the same head."""
        return self.layers * drafter_layers / target_layers + self.head


def model_layers(model: str) -> int:
    """The decoder layers of ``model`` from the config aiconfigurator ships for it (ValueError: not shipped)."""
    name = f"{model.replace('/', '--')}_config.json"
    file = resources.files("aiconfigurator_core") / "model_configs" / name
    if not file.is_file():
        shipped = sorted(p.name.removesuffix("_config.json").replace("--", "/")
                         for p in (resources.files("aiconfigurator_core") / "model_configs").iterdir()
                         if not p.name.endswith("_hf_quant_config.json"))
        raise ValueError(f"aiconfigurator has no config for model {model!r}; it ships {', '.join(shipped[:12])}, ...")
    return int(json.loads(file.read_text())["num_hidden_layers"])


def serving_costs(model: str, gpu: str, engine: str, drafter: str, context: int,
                  batches: Sequence[int] = SERVING_BATCHES, lengths: Sequence[int] = SERVING_LENGTHS,
                  version: str | None = None) -> BatchCostTable:
    """The :class:`BatchCostTable` of ``model`` on ``gpu`` (an aiconfigurator system such as ``h100_sxm``) under
    ``engine`` (``vllm``, ``sglang``, ``trtllm``) at ``context`` cached tokens, with a ``drafter`` of
    :data:`DRAFTERS` priced as it drafts."""
    import logging

    from aiconfigurator_core.sdk import EngineHandle
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    if drafter not in DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; known: {', '.join(DRAFTERS)}")
    spec, layers = DRAFTERS[drafter], model_layers(model)
    version = version or get_latest_database_version(gpu, engine)
    if version is None:
        raise ValueError(f"aiconfigurator has no {engine} data for {gpu}; see its systems/data folder")
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    handles: dict[int, EngineHandle] = {}

    def step(batch: int, tokens: int) -> Step:
        if tokens not in handles:
            handles[tokens] = EngineHandle.compile(model, gpu, engine, backend_version=version, nextn=tokens - 1)
        ops = handles[tokens].decode_step_per_op(batch, context, 2)
        scale = 1e-3 * layers / (layers + tokens - 1)  # ms -> s, and the MTP layers taken out
        head = sum(op[1] for op in ops if op[0] in HEAD_OPS)
        return Step((sum(op[1] for op in ops) - head) * scale, head * scale)

    steps = {b: {n: step(b, n) for n in sorted({1, *lengths})} for b in batches}
    verify = {b: {n: s.layers + s.head for n, s in row.items()} for b, row in steps.items()}
    if spec.kind == "block":
        draft = {b: {n: s.drafter(layers, spec.layers) for n, s in row.items() if n > 1} for b, row in steps.items()}
    else:
        draft = {b: {n: (n - 1) * row[1].drafter(layers, spec.layers) for n in row if n > 1}
                 for b, row in steps.items()}
    source = (f"aiconfigurator-core {metadata.version('aiconfigurator-core')} (Apache-2.0, NVIDIA), measured "
              f"operator data {gpu}/{engine} {version}, composed by its estimator (decode_step_per_op); target "
              f"{model} ({layers} layers), {spec.about}; the estimator's default precision for the model")
    return BatchCostTable(verify, draft, None, f"{gpu} under {engine} {version} (modelled from measured operators)",
                          "bfloat16", context, {}, source, spec.kind)
