"""Policies serving a sweep store's prompts in the serving simulation, and the engine configurations
``specpolicy export`` writes (modelled; numpy only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specpolicy.evaluation.metrics import PolicyResults, PromptResult
from specpolicy.evaluation.replay import check_policies, prompt_observation
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.replay.serving import ServingResult, simulate_serving
from specpolicy.replay.table import ReplayTable
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore


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
    """Every policy serving the store's prompts at ``concurrency``
    (:func:`~specpolicy.replay.serving.simulate_serving`).

    Per request: tokens, its share of the step seconds, and plain AR's time at the same concurrency
    (a batched one-token step per token). Policies price choices with ``costs.at_concurrency``;
    ``on_served(policy, result)`` sees each simulation (every cycle is in ``result.records``).
    ``prompts``: the store read once by :meth:`StoredPrompts.load` (default: read it now).
    """
    check_policies(policies, store)
    prompts = prompts or StoredPrompts.load(store)
    priced = costs.at_concurrency(concurrency, store.candidates)
    observations = [replace(o, costs=priced, concurrency=concurrency) for o in prompts.observations]
    answers = [Answers(r.taus, t, r.training_block_size) for r, t in zip(prompts.records, prompts.tables)]
    results = []
    for policy in policies:
        plans = [lambda o=o, a=a, p=policy: p.checked_plan(o, a) for o, a in zip(observations, answers)]
        served = simulate_serving(prompts.tables, plans, costs, concurrency)
        if on_served is not None:
            on_served(policy, served)
        result = PolicyResults(policy.name, f"modelled{', synthetic costs' if 'synthetic' in costs.machine else ''}, "
                                            f"concurrency {concurrency}")
        for i, record in enumerate(prompts.records):
            result.prompts.append(PromptResult(record.prompt_id, [], served.tau(i), served.tokens[i],
                                               served.seconds[i], served.tokens[i] * priced.ar_seconds, 0))
        results.append(result)
    return results


def export_for_engines(built: Policy, store: SweepStore, costs: BatchCostTable, batches: Sequence[int], drafter: str,
                       on_batch: Callable[[str], object] | None = None, fastest: bool = False) -> dict:
    """``built`` served at every concurrency, and the vLLM and SGLang configurations that run it as closely
    as each engine can (:func:`~specpolicy.replay.export.closest_configs`), each priced by simulating exactly
    what the engine runs; with ``fastest``, also the fastest static configurations for the store, whatever the
    policy (:func:`~specpolicy.replay.export.choose_vllm`, :func:`~specpolicy.replay.export.choose_sglang`).
    The document ``specpolicy export`` writes."""
    from specpolicy.replay.export import EngineConfigPolicy, choose_sglang, choose_vllm, closest_configs

    candidates, policy = store.candidates, built.name
    check_policies([built], store)  # before reading the store
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
    vllm, sglang = closest_configs({batch: run.records for batch, (run, _) in dynamic.items()}, drafter)
    configs = {"vllm": vllm, "sglang": sglang}
    if fastest:
        def throughput(config, batch: int) -> float:
            return engine(config, batch)[0].throughput

        configs |= {"fastest_vllm": choose_vllm(candidates, batches, throughput, drafter),
                    "fastest_sglang": choose_sglang(candidates, batches, throughput, drafter)}
    rows = []
    for batch in batches:
        row = {"batch_size": batch, "policy_tokens_per_s": round(dynamic[batch][0].throughput, 1),
               "policy_speedup_over_ar": round(dynamic[batch][1], 3)}
        for name, config in configs.items():
            if config is not None:
                run, speedup = engine(config, batch)
                row |= {f"{name}_tokens_per_s": round(run.throughput, 1), f"{name}_speedup_over_ar": round(speedup, 3)}
        if vllm is not None:
            row["vllm_verified_drafts"] = vllm.verified(batch)
        rows.append(row)
        if on_batch is not None:
            on_batch(f"concurrency {batch}: {policy} {row['policy_tokens_per_s']:.0f} tok/s; as exported: vLLM "
                     f"{row.get('vllm_tokens_per_s', '-')}, SGLang {row['sglang_tokens_per_s']} tok/s (modelled)")
    document = {"policy": policy, "per_batch_size": rows,
                "vllm_speculative_config": vllm.to_json() if vllm is not None else None,
                "sglang_args": sglang.args(),
                "semantics": "the configurations run the policy as closely as each engine can: SGLang one block "
                             "size (the policy's most run; no flags: speculation off), vLLM one drafted block of "
                             "num_speculative_tokens + 1 (the policy's most run B > 1; null: the policy never "
                             "drafts) verifying K + 1 per batch size (the L it verifies most there). Each engine's "
                             "columns price exactly that configuration; read one back with --policies "
                             "vllm-config:FILE or sglang-config:FILE."}
    if fastest:
        document["fastest_static"] = {"vllm_speculative_config": configs["fastest_vllm"].to_json(),
                                      "sglang_args": configs["fastest_sglang"].args(),
                                      "semantics": "the fastest static configuration of each engine for this "
                                                   "store, whatever the policy (columns fastest_*)"}
    return document
