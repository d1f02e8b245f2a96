"""Serving cost tables of datacenter GPUs composed by NVIDIA's aiconfigurator from its measured operators
(``pip install 'specpolicy[aiconfigurator]'``; no GPU, no network): every number is its estimator's
``decode_step_per_op`` of one engine step, taken apart into verify and drafter as docs/real-data.md says."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources

from specpolicy.arguments import check_candidate_set, check_count, check_counts
from specpolicy.defaults import PREFILL_LENGTHS, SCHEDULED_TOKENS, SERVING_BATCHES, SERVING_LENGTHS
from specpolicy.replay.batch_costs import BatchCostTable

SERVING_ENGINES = ("vllm", "sglang", "trtllm")
"""the engines aiconfigurator measures operators under"""
EMBEDDING, LOGITS, ATTENTION = "generation_embedding", "generation_logits_gemm", "generation_attention"
"""aiconfigurator's operators outside the decoder layers (the rest of a step is theirs), and attention"""


@dataclass(frozen=True)
class Drafter:
    kind: str
    """``block`` or ``chain`` (:data:`~specpolicy.defaults.DRAFTER_KINDS`)"""
    layers: int
    about: str
    vocabulary: int | None = None
    """its own LM head's vocabulary (``None``: the target's head)"""


DRAFTERS = {
    "dflash": Drafter("block", 5, "DFlash: 5 decoder layers and the target's LM head, one pass per block"),
    "eagle3": Drafter("chain", 1, "EAGLE-3: a decoder layer and a 32,000-token LM head per drafted position",
                      32_000),
}


@dataclass(frozen=True)
class Step:
    """One priced step of the target: its decoder layers', embedding's and LM head's seconds."""

    layers: float
    embedding: float
    logits: float

    def drafter(self, target_layers: int, drafter_layers: int, logits: float | None = None) -> float:
        """A drafter of ``drafter_layers`` such layers at this shape, with the target's head or ``logits``."""
        return self.layers * drafter_layers / target_layers + self.embedding + (self.logits if logits is None
                                                                               else logits)


def padded(verify: dict[int, dict[int, float]]) -> dict[int, dict[int, float]]:
    """Each ``verify[b][n]`` as the cheapest step of at least b requests x n tokens: an engine pads a batch to
    its captured graph sizes; aiconfigurator's measured GEMMs are up to 7% cheaper at some wider shapes."""
    out: dict[int, dict[int, float]] = {}
    wider: dict[int, float] = {}  # the next larger batch's padded row
    for b in sorted(verify, reverse=True):
        row, cheapest = {}, float("inf")
        for n in sorted(verify[b], reverse=True):
            cheapest = min(cheapest, verify[b][n])
            row[n] = min(cheapest, wider.get(n, cheapest))
        out[b] = wider = dict(sorted(row.items()))
    return dict(sorted(out.items()))


def model_config(model: str) -> dict:
    """The config aiconfigurator ships for ``model`` (ValueError naming what it ships when there is none)."""
    name = f"{model.replace('/', '--')}_config.json"
    file = resources.files("aiconfigurator_core") / "model_configs" / name
    if not file.is_file():
        shipped = sorted(p.name.removesuffix("_config.json").replace("--", "/")
                         for p in (resources.files("aiconfigurator_core") / "model_configs").iterdir()
                         if not p.name.endswith("_hf_quant_config.json"))
        raise ValueError(f"aiconfigurator has no config for model {model!r}; it ships "
                         f"{', '.join(shipped[:12])}, ...")
    return json.loads(file.read_text())


def check_serving_arguments(engine: str, drafter: str, context: object, batches: object = SERVING_BATCHES,
                            lengths: object = SERVING_LENGTHS) -> None:
    """The one check of :func:`serving_costs`' arguments, before aiconfigurator is imported."""
    if engine not in SERVING_ENGINES:
        raise ValueError(f"unknown engine {engine!r}; aiconfigurator measures {', '.join(SERVING_ENGINES)}")
    if drafter not in DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; known: {', '.join(DRAFTERS)}")
    check_count(context, "context")
    check_counts(batches, "batches")
    check_candidate_set(lengths, "lengths")


def kv_capacity(model: str, gpu: str, engine: str, version: str, drafter: Drafter, layers: int,
                tokens: int, batch: int) -> tuple[int, str, str]:
    """(requests of ``tokens`` each that ``gpu``'s KV cache holds under ``engine``'s default memory fraction,
    the cache named, how estimated): aiconfigurator's memory estimate of the target (``batch`` requests at
    most) less the drafter's weights, over both models' KV per token."""
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.memory import estimate_kv_cache

    backend = get_backend(engine)
    fraction, pool = backend.get_default_free_gpu_memory_fraction(version), backend.memory_fraction_of_free()
    estimate = estimate_kv_cache(model, gpu, engine, version, max_num_tokens=SCHEDULED_TOKENS,
                                 max_batch_size=batch, memory_fraction_kind="of_free" if pool else "of_total",
                                 memory_fraction_value=fraction)
    share = drafter.layers / layers
    budget = estimate["total_kv_size_bytes"] - share * estimate["memory_breakdown"]["weights_bytes"]
    requests = int(budget // (estimate["kv_size_per_token_bytes"] * (1 + share) * tokens))
    return (requests, f"the KV cache of {gpu} under {engine} {version}",
            f"{fraction} of its {'free' if pool else 'total'} memory, aiconfigurator's estimate, with the "
            f"drafter's {drafter.layers} layer{'s' if drafter.layers > 1 else ''}")


def serving_costs(model: str, gpu: str, engine: str, drafter: str, context: int,
                  batches: Sequence[int] = SERVING_BATCHES, lengths: Sequence[int] = SERVING_LENGTHS,
                  version: str | None = None) -> BatchCostTable:
    """The :class:`BatchCostTable` of ``model`` on ``gpu`` (an aiconfigurator system such as ``h100_sxm``)
    under ``engine`` (``vllm``, ``sglang``, ``trtllm``) at ``context`` cached tokens, with a ``drafter`` of
    :data:`DRAFTERS` priced as it drafts."""
    import logging

    check_serving_arguments(engine, drafter, context, batches, lengths)
    batches = sorted({1, *batches})  # every table prices one request: a served batch interpolates from it
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version, get_supported_databases

    spec, config = DRAFTERS[drafter], model_config(model)
    layers = int(config["num_hidden_layers"])
    version = version or get_latest_database_version(gpu, engine)
    if version is None:
        systems = sorted(system for system, engines in get_supported_databases().items() if engine in engines)
        raise ValueError(f"aiconfigurator has no {engine} data for {gpu}; pass --gpu {' or '.join(systems)}")
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    held, cache, basis = kv_capacity(model, gpu, engine, version, spec, layers, context + max(lengths),
                                     max(batches))
    if held < 1:
        raise ValueError(f"{cache} holds no request of {context:,} tokens ({basis}); choose a shorter "
                         "--context")
    batches = [*(b for b in batches if b < held), held] if held < max(batches) else list(batches)
    verify, draft, prefill = _compose(model, gpu, engine, version, context, spec, config, batches, lengths)
    source = (f"aiconfigurator-core {metadata.version('aiconfigurator-core')} (Apache-2.0, NVIDIA), measured "
              f"operator data {gpu}/{engine} {version}, composed by its estimator (decode_step_per_op; a "
              f"verify's attention as its decode attention over the same caches; padded to a cheaper shape; "
              f"prefill: predict_prefill_latency of one request, the target's alone); target "
              f"{model} ({layers} layers), {spec.about}; the estimator's default precision for the model")
    machine = f"{gpu} under {engine} {version} (modelled from measured operators)"
    capacity = f"{cache} holds {held:,} requests of {context:,} + {max(lengths)} tokens ({basis})"
    return BatchCostTable(verify, draft, None, machine, "bfloat16", context, {}, source, spec.kind, capacity,
                          prefill)


def _compose(model: str, gpu: str, engine: str, version: str, context: int, spec: Drafter, config: dict,
             batches: Sequence[int], lengths: Sequence[int]) -> tuple[dict, dict, dict]:
    """(``verify[b][n]``, ``draft[b][n]``, ``prefill[n]``) seconds from the estimator's steps taken apart (the
    module's docstring says how), every step at ``context`` cached tokens per request."""
    from aiconfigurator_core.sdk import EngineHandle, common
    from aiconfigurator_core.sdk.engine import build_ops_json
    from aiconfigurator_core.sdk.operations import GEMM

    layers = int(config["num_hidden_layers"])
    handles: dict[int, EngineHandle] = {}

    @functools.cache
    def per_op(batch: int, tokens: int) -> dict[str, float]:
        """Milliseconds by operator of the estimator's step of ``tokens`` per request, MTP layers out."""
        if tokens not in handles:
            handles[tokens] = EngineHandle.compile(model, gpu, engine, backend_version=version,
                                                   nextn=tokens - 1)
        scale = layers / (layers + tokens - 1)
        return {op[0]: op[1] * scale for op in handles[tokens].decode_step_per_op(batch, context, 2)}

    def step(batch: int, tokens: int) -> Step:
        ops = {**per_op(batch, tokens), ATTENTION: per_op(batch, 1)[ATTENTION]}  # each cache read once
        return Step(1e-3 * (sum(ops.values()) - ops[EMBEDDING] - ops[LOGITS]), 1e-3 * ops[EMBEDDING],
                    1e-3 * ops[LOGITS])

    def own_logits(batch: int) -> float | None:
        """The drafter's own LM head over one token per request, from the measured GEMM table."""
        if spec.vocabulary is None:
            return None
        gemm = GEMM(LOGITS, 1, spec.vocabulary, int(config["hidden_size"]), common.GEMMQuantMode.bfloat16)
        ops = handles[1].evaluate_ops_json(build_ops_json([gemm]), is_context=False, batch_size=batch,
                                           s=context + 2)
        return 1e-3 * sum(op[1] for op in ops)

    steps = {b: {n: step(b, n) for n in sorted({1, *lengths})} for b in batches}
    verify = padded({b: {n: s.layers + s.embedding + s.logits for n, s in row.items()}
                     for b, row in steps.items()})
    if spec.kind == "block":
        draft = {b: {n: s.drafter(layers, spec.layers) for n, s in row.items() if n > 1}
                 for b, row in steps.items()}
    else:
        heads = {b: row[1].drafter(layers, spec.layers, own_logits(b)) for b, row in steps.items()}
        draft = {b: {n: (n - 1) * heads[b] for n in row if n > 1} for b, row in steps.items()}
    prefill = {n: 1e-3 * handles[1].predict_prefill_latency(1, n) for n in PREFILL_LENGTHS}
    return verify, draft, prefill
