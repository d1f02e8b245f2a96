"""Verdicts on real models' data: SpecDecode-Bench's Llama-3.1-8B-Instruct acceptance traces (EAGLE-3 chain
drafts), served at each concurrency with a serving cost table of the same model whose drafter is priced as it
drafts (shipped: aiconfigurator's measured H100 operators under vLLM, an EAGLE-3 head per drafted position).

Per dataset and concurrency, on the held-out side of the store's split (by request): every fixed K, the best
of them (chosen on the held-out requests themselves: the hardest baseline), the per-prompt and per-step
oracles, the cost-aware rules and the engines' rules, and ``cycle`` trained on the other side (priced at batch
one). Ratios are paired against the best fixed K; gain shares are of the per-step oracle's gain over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specpolicy.evaluation.metrics import SummaryRow, summarize
from specpolicy.evaluation.serving import StoredPrompts, evaluate_serving
from specpolicy.registry import create_policy
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces.specdecode import import_specdecode
from specpolicy.training.train import TrainArgs
from specpolicy.training.train import main as train

DATASETS = ("gsm8k", "instructcoder", "sharegpt", "cnn")
RULES = ("oracle", "oracle-step", "adaptive", "heuristic", "grow", "llamacpp-pmin", "vllm-dsd",
         "trtllm-schedule")
LLAMA_H100 = "aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024"


@dataclass
class Verdict:
    dataset: str
    drafter: str
    concurrency: int
    requests: int
    best_fixed: str
    rows: dict[str, SummaryRow]


def priced_for(drafter: str, costs: BatchCostTable) -> BatchCostTable:
    """The table a drafter's cycles are priced with: an n-gram lookup drafts for free (a what-if, said so)."""
    if drafter == "eagle":
        return costs
    return replace(costs, draft={b: {n: 0.0 for n in row} for b, row in costs.draft.items()},
                   source=costs.source + "; n-gram drafting priced at 0 (what-if)")


def bench_traces(folder: Path, work: Path, costs: BatchCostTable, drafter: str = "eagle",
                 concurrencies: tuple[int, ...] = (1,), on_dataset: Callable[[str], object] | None = None
                 ) -> list[Verdict]:
    """Import each ``combined_{dataset}.jsonl`` of ``folder`` into ``work``, train ``cycle`` on the train side
    and serve the validation side at each of ``concurrencies``."""
    costs, verdicts = priced_for(drafter, costs), []
    for dataset in DATASETS:
        if on_dataset:
            on_dataset(dataset)
        store_path = work / f"{dataset}-{drafter}"
        imported = import_specdecode(folder / f"combined_{dataset}.jsonl", store_path, drafter)
        sizes = imported.store.candidates
        cycle_path = work / f"cycle-{dataset}-{drafter}"
        costs_file = work / f"costs-{drafter}-{Path(costs.machine).name[:40].replace(' ', '-')}.json"
        costs.at_concurrency(1, sizes).save(costs_file)
        if not cycle_path.exists():
            train(TrainArgs(policy="cycle", sweep=store_path, out=cycle_path, costs=costs_file))
        held = SweepStore.load(store_path, split="validation")
        names = [f"fixed{b}" for b in sizes if b > 1] + list(RULES) + [f"cycle:{cycle_path}"]
        policies, prompts = [create_policy(name, sizes) for name in names], StoredPrompts.load(held)
        for concurrency in concurrencies:
            results = evaluate_serving(held, policies, costs, concurrency, prompts=prompts, prefills=False)
            speed = {r.policy: r.speedup() for r in results}
            best = max((n for n in speed if n.startswith("fixed")), key=speed.get)
            rows = {row.policy: row for row in summarize(results, baseline=best, oracle="oracle-step")}
            verdicts.append(Verdict(dataset, drafter, concurrency, len(results[0].prompts), best, rows))
    return verdicts


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    """A markdown table: per dataset, speed over plain AR of the best fixed K, and ratios to it (paired 95%
    CI)."""
    def ratio(row: SummaryRow) -> str:
        low, high = row.vs_baseline_ci95
        return f"{row.vs_baseline:.3f} ({low:.3f}-{high:.3f})"

    def share(row: SummaryRow) -> str:
        return f"{100 * row.gain_share:.0f}%"

    lines = ["| data | drafter | concurrency | held-out requests | best fixed | its speedup | per-prompt "
             "oracle | "
             "per-step oracle | adaptive (share) | cycle (share) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        r = v.rows
        cycle = next(row for name, row in r.items() if name.startswith("cycle"))
        lines.append(f"| {v.dataset} | {v.drafter} | {v.concurrency} | {v.requests} | {v.best_fixed} "
                     f"| {r[v.best_fixed].speedup:.2f}x | "
                     f"{ratio(r['oracle'])} | {ratio(r['oracle-step'])} | {ratio(r['adaptive'])} "
                     f"({share(r['adaptive'])}) | {ratio(cycle)} ({share(cycle)}) |")
    return lines
