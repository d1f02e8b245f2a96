"""Policy evaluation from a sweep store (replay: modelled time) or by live decoding (measured time).

Figures and intervals over the results live in :mod:`specpolicy.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from specpolicy.arrays import to_numpy
from specpolicy.batch_costs import BatchCostTable
from specpolicy.costs import CostTable
from specpolicy.cycles import mean_acceptance
from specpolicy.decoding import SpeculativeDecoder, plain_decode
from specpolicy.engine import check_live, decode
from specpolicy.metrics import PolicyResults, PromptResult
from specpolicy.policy import TRAINING_BLOCK_SIZE, Answers, Policy, PromptObservation, check_vocabulary, oracle_label
from specpolicy.replay_table import ReplayTable
from specpolicy.serving import ServingResult, simulate_serving
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore

__all__ = ["PolicyResults", "PromptResult", "check_candidates", "evaluate_live", "evaluate_replay",
           "oracle_block_size"]


def check_candidates(policy: Policy, available: Sequence[int], confidences: Sequence[int] | None = None) -> None:
    """Fail, naming both sides, when ``policy`` can choose a block size the sweep did not record, or reads
    drafter confidences it did not record (``confidences``: the sweep's; ``None`` skips that check)."""
    wanted = policy.choices()
    missing = sorted(wanted - set(available))
    if missing:
        raise ValueError(f"policy {policy.name!r} chooses among {sorted(wanted)} but the sweep recorded "
                         f"{sorted(available)} (missing {missing}); sweep them too "
                         f"(specpolicy sweep --candidates {','.join(map(str, sorted({*available, *missing})))})")
    unread = sorted(policy.confidence_sizes() - set(confidences or [])) if confidences is not None else []
    if unread:
        raise ValueError(f"policy {policy.name!r} reads the drafter's confidences at B = {unread}, which the sweep did "
                         f"not record; sweep with --verify-lengths --confidences {','.join(map(str, unread))}")


def prompt_observation(store: SweepStore, record: SweepRecord, costs: CostTable | None = None) -> PromptObservation:
    """What a policy reads for a stored prompt: its prefill logits (as the sweep kept them), and ``costs``."""
    logits = to_numpy(store.features(record)) if record.features else np.zeros(0, dtype=np.float32)
    return PromptObservation(logits, record.prompt_length, record.prompt_id, costs)


def oracle_block_size(record: SweepRecord, table: ReplayTable | None, candidates: Sequence[int],
                      costs: CostTable | None, training_block_size: int = TRAINING_BLOCK_SIZE) -> int:
    """The per-prompt oracle's block size: fewest modelled seconds with ``costs`` (else highest tau).

    Ties go to the candidate nearest ``training_block_size``, then the smaller.
    """
    if costs is not None and table is not None:
        return table.fastest_fixed(costs, candidates, training_block_size)
    return candidates[oracle_label(record.tau_row(candidates), candidates, training_block_size)]


def evaluate_replay(
    store: SweepStore,
    policies: Sequence[Policy],
    on_prompt: Callable[[], None] | None = None,
    *,
    costs: CostTable | None = None,
    candidates: Sequence[int] | None = None,
) -> list[PolicyResults]:
    """Evaluate policies on every valid record of ``store`` by exact replay (or stored taus).

    Args:
        costs: the cost table modelled time is priced with (default: the store's own).
        candidates: the block sizes the per-prompt oracle label ranges over (default: the store's).
    """
    for policy in policies:
        check_candidates(policy, store.candidates, store.meta.get("confidence_sizes", []))
    check_vocabulary(policies, store.feature_width(), f"the sweep {store.path}")
    costs = costs if costs is not None else store.latency()
    candidates = tuple(candidates or store.candidates)
    live = store.meta.get("mode") == "live"  # a live sweep measured every fixed size: its own times
    results = [PolicyResults(p.name, "measured" if live else "modelled" if costs else "none") for p in policies]
    records = list(store.records())
    if not records:
        raise ValueError(f"sweep store {store.path} has no valid records; run or resume the sweep first")
    for record in records:
        observation = prompt_observation(store, record, costs)
        table = record.table() if record.replay is not None else None
        measured = {b: r.decode_seconds / max(1, r.tokens) for b, r in record.live.items()} if live else None
        answers = Answers(record.taus, table, record.training_block_size, measured)
        oracle = (answers.fastest_measured(candidates) if live
                  else oracle_block_size(record, table, candidates, costs, answers.training_block_size))
        for policy, result in zip(policies, results):
            result.prompts.append(_measured(policy, observation, answers, record, oracle) if live
                                  else _replayed(policy, observation, answers, record.prompt_id, costs, oracle))
        if on_prompt:
            on_prompt()
    return results


@dataclass
class StoredPrompts:
    """A replay store's prompts read once (records, replay tables, prefill observations without costs), for
    callers that simulate them many times, e.g. at several concurrencies."""

    records: list[SweepRecord]
    tables: list[ReplayTable]
    observations: list[PromptObservation]

    @classmethod
    def load(cls, store: SweepStore) -> StoredPrompts:
        records = [r for r in store.records() if r.replay is not None]
        if not records:
            raise ValueError(f"sweep store {store.path} has no replay records; run a replay sweep first")
        return cls(records, [r.table() for r in records], [prompt_observation(store, r) for r in records])


def evaluate_serving(store: SweepStore, policies: Sequence[Policy], costs: BatchCostTable, concurrency: int,
                     on_served: Callable[[Policy, ServingResult], object] | None = None,
                     prompts: StoredPrompts | None = None) -> list[PolicyResults]:
    """Every policy serving the store's prompts at ``concurrency`` (:func:`~specpolicy.serving.simulate_serving`).

    Per request: tokens, its share of the step seconds, and plain AR's time at the same concurrency
    (a batched one-token step per token). Policies price choices with ``costs.at_concurrency``;
    ``on_served(policy, result)`` sees each simulation (every cycle is in ``result.records``).
    ``prompts``: the store read once by :meth:`StoredPrompts.load` (default: read it now).
    """
    for policy in policies:
        check_candidates(policy, store.candidates, store.meta.get("confidence_sizes", []))
    check_vocabulary(policies, store.feature_width(), f"the sweep {store.path}")
    prompts = prompts or StoredPrompts.load(store)
    priced = costs.at_concurrency(concurrency, store.candidates)
    observations = [replace(o, costs=priced, concurrency=concurrency) for o in prompts.observations]
    answers = [Answers(r.taus, t, r.training_block_size) for r, t in zip(prompts.records, prompts.tables)]
    results = []
    for policy in policies:
        plans = [lambda o=o, a=a, p=policy: p.plan(o, a) for o, a in zip(observations, answers)]
        served = simulate_serving(prompts.tables, plans, costs, concurrency)
        if on_served is not None:
            on_served(policy, served)
        result = PolicyResults(policy.name, f"modelled, concurrency {concurrency}")
        for i, record in enumerate(prompts.records):
            result.prompts.append(PromptResult(record.prompt_id, [], served.tau(i), served.tokens[i],
                                               served.seconds[i], served.tokens[i] * priced.ar_seconds, 0))
        results.append(result)
    return results


def _replayed(policy: Policy, observation: PromptObservation, answers: Answers, prompt_id: str,
              costs: CostTable | None, oracle: int) -> PromptResult:
    """One policy on one stored prompt: replayed cycles priced with ``costs``."""
    plan = policy.plan(observation, answers)
    table = answers.table
    if table is not None:
        logits = torch.from_numpy(observation.logits) if observation.logits.size else None
        cycles = table.simulate(plan, logits)
        sizes, tau, tokens = [c.block_size for c in cycles], mean_acceptance(cycles), sum(c.committed for c in cycles)
    elif plan.block_size is not None and plan.length is None:
        sizes, tau, tokens = [plan.block_size], float(answers.taus[plan.block_size]), 0
    else:
        raise ValueError(f"per-cycle policy {policy.name!r} needs a replay sweep; the store has only taus")
    timed = costs is not None and table is not None and bool(sizes)
    seconds = costs.cycles_seconds(cycles) if timed else 0.0
    ar_seconds = tokens * costs.ar_seconds if timed else None
    return PromptResult(prompt_id, sizes, tau, tokens, seconds, ar_seconds, oracle)


def _measured(policy: Policy, observation: PromptObservation, answers: Answers, record: SweepRecord,
              oracle: int) -> PromptResult:
    """One per-prompt policy on a live sweep's prompt: the decode measured at its block size; plain AR's time
    is the B = 1 decode's (through the speculative loop), scaled to the same tokens."""
    plan = policy.plan(observation, answers)
    if plan.block_size is None or plan.length is not None:
        raise ValueError(f"policy {policy.name!r} decides per cycle or sets verify lengths; a live sweep measured "
                         "fixed block sizes only: sweep with --mode replay for it")
    run, ar = record.live[plan.block_size], record.live[1]
    ar_seconds = ar.decode_seconds * run.tokens / max(1, ar.tokens)
    return PromptResult(record.prompt_id, [plan.block_size], run.tau, run.tokens, run.decode_seconds, ar_seconds,
                        oracle)


def evaluate_live(
    decoder: SpeculativeDecoder,
    prompts: Sequence[tuple[str, list[int]]],
    policies: Sequence[Policy],
    seed: int = 0,
    on_prompt: Callable[[], None] | None = None,
    costs: CostTable | None = None,
) -> list[PolicyResults]:
    """Decode every prompt with plain AR and with every policy, in an order that rotates per prompt.

    Measured speedups divide by plain AR decoding of the same prompt (:func:`plain_decode`, the work
    of transformers' ``generate``). ``costs``: the table cost-aware policies read.
    """
    check_live(policies)
    results = [PolicyResults(p.name, "measured") for p in policies]
    for n, (prompt_id, ids) in enumerate(prompts):
        runners = [None, *range(len(policies))]  # None = plain AR
        shift = n % len(runners)
        traces = {}
        for which in runners[shift:] + runners[:shift]:
            if which is None:
                traces[which] = plain_decode(decoder, ids, seed=seed)
            else:
                traces[which] = decode(decoder, ids, policies[which], prompt_id=prompt_id, costs=costs, seed=seed)
        ar = traces[None]
        for i, result in enumerate(results):
            trace = traces[i]
            ar_seconds = ar.decode_seconds * trace.cycle_tokens / max(1, ar.cycle_tokens)
            result.prompts.append(PromptResult(prompt_id, [c.block_size for c in trace.cycles], trace.tau,
                                               trace.cycle_tokens, trace.decode_seconds, ar_seconds))
        if on_prompt:
            on_prompt()
    return results


def export_for_engines(built: Policy, store: SweepStore, costs: BatchCostTable, batches: Sequence[int], drafter: str,
                       on_batch: Callable[[str], object] | None = None) -> dict:
    """``built`` served at every concurrency, and the vLLM and SGLang configurations closest to it
    (:func:`~specpolicy.export.choose_vllm`, :func:`~specpolicy.export.choose_sglang`), each priced by simulating
    exactly what the engine runs; the document ``specpolicy export`` writes."""
    from specpolicy.export import EngineConfigPolicy, choose_sglang, choose_vllm

    candidates, policy = store.candidates, built.name
    check_candidates(built, candidates, store.meta.get("confidence_sizes", []))  # before reading the store
    prompts = StoredPrompts.load(store)

    def served(chosen, batch: int):
        seen: list = []
        [result] = evaluate_serving(store, [chosen], costs, batch, prompts=prompts,
                                    on_served=lambda _, run: seen.append(run))
        return seen[0], float(result.column("ar_seconds").sum() / result.column("seconds").sum())

    priced: dict[tuple[int, int, int], tuple] = {}  # (B, L, batch) -> (served, speedup): configs share plans

    def engine(config, batch: int):
        key = (*config.shape(batch), batch)
        if key not in priced:
            priced[key] = served(EngineConfigPolicy(config, candidates), batch)
        return priced[key]

    dynamic = {batch: served(built, batch) for batch in batches}
    sglang = choose_sglang(candidates, batches, lambda config, batch: engine(config, batch)[0].throughput, drafter)
    vllm = choose_vllm(candidates, batches, lambda config, batch: engine(config, batch)[0].throughput, drafter)
    rows = []
    for batch in batches:
        row = {"batch_size": batch, "policy_tokens_per_s": round(dynamic[batch][0].throughput, 1),
               "policy_speedup_over_ar": round(dynamic[batch][1], 3)}
        for name, config in (("vllm", vllm), ("sglang", sglang)):
            run, speedup = engine(config, batch)
            row |= {f"{name}_tokens_per_s": round(run.throughput, 1), f"{name}_speedup_over_ar": round(speedup, 3)}
        row["vllm_verified_drafts"] = vllm.verified(batch)
        rows.append(row)
        if on_batch is not None:
            on_batch(f"concurrency {batch}: {policy} {row['policy_tokens_per_s']:.0f} tok/s; exported vLLM "
                     f"{row['vllm_tokens_per_s']}, SGLang {row['sglang_tokens_per_s']} tok/s (modelled)")
    return {"policy": policy, "per_batch_size": rows,
            "vllm_speculative_config": vllm.to_json(),
            "sglang_args": sglang.args(),
            "semantics": "vLLM drafts num_speculative_tokens + 1 every step and verifies K + 1 (K per batch size, "
                         "clamped to num_speculative_tokens); SGLang drafts and verifies one block size "
                         "(no flags: speculation off). Each engine's columns price exactly that configuration; "
                         "read one back with --policies vllm-config:FILE or sglang-config:FILE."}
