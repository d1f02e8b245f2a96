"""Policies serving a sweep store's prompts in the serving simulation (modelled; numpy only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specpolicy.arguments import check_type
from specpolicy.cycles import Plan
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
                     prompts: StoredPrompts | None = None, prefills: bool = True) -> list[PolicyResults]:
    """Every policy serving the store's prompts at ``concurrency``, against plain AR served through the same
    simulation, each request's prefill priced beside its decode steps where the table prices it (``prefills``:
    False, decode steps only); ``on_served(policy, result)`` sees each simulation."""
    check_policies(policies, store)
    check_type(costs, BatchCostTable, "costs", "BatchCostTable.load(path)")
    prompts = prompts or StoredPrompts.load(store)
    priced = costs.at_concurrency(concurrency, store.candidates)
    observations = [replace(o, costs=priced, concurrency=concurrency) for o in prompts.observations]
    answers = [Answers(r.taus, t, r.training_block_size) for r, t in zip(prompts.records, prompts.tables)]
    prefill = [costs.prefill_seconds(t.prompt_length) if prefills else 0.0 for t in prompts.tables]
    view = f"{', synthetic costs' if 'synthetic' in costs.machine else ''}, " \
           f"{'prefill + decode' if any(prefill) else 'decode-only'}, concurrency {concurrency}"
    plain = simulate_serving(prompts.tables, [lambda: Plan.fixed(1)] * len(prompts.tables), costs,
                             concurrency)
    results = []
    for policy in policies:
        plans = [lambda o=o, a=a, p=policy: p.checked_plan(o, a) for o, a in zip(observations, answers)]
        served = simulate_serving(prompts.tables, plans, costs, concurrency, store.candidates)
        if on_served is not None:
            on_served(policy, served)
        result = PolicyResults(policy.name, f"modelled{view}")
        for i, record in enumerate(prompts.records):  # plain's seconds per token, for the policy's tokens (a
            # store of rounds: plain walks the rounds a token each, so it serves fewer tokens than a policy)
            n = plain.tokens[i]
            ar = plain.seconds[i] * served.tokens[i] / n + prefill[i] if n else None
            result.prompts.append(PromptResult(record.prompt_id, [], served.tau(i), served.tokens[i],
                                               served.seconds[i] + prefill[i], ar, None, served.cycles[i]))
        results.append(result)
    return results
