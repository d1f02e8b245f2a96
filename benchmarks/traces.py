"""Verdicts on real models' data: SpecDecode-Bench's Llama-3.1-8B-Instruct acceptance traces, priced with CAST's
measured H100 table of the same model (batch one, modelled time).

Per dataset, on the held-out side of the store's split (by request): every fixed K, the best of them (chosen on the
held-out requests themselves: the hardest baseline), the per-prompt and per-step oracles, the cost-aware rules and
the engines' rules, and ``cycle`` trained on the other side. Ratios are paired against the best fixed K; gain
shares are of the per-step oracle's gain over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specpolicy.costs import CostTable
from specpolicy.evaluation.metrics import SummaryRow, summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import import_specdecode
from specpolicy.training.train import TrainArgs
from specpolicy.training.train import main as train

DATASETS = ("gsm8k", "instructcoder", "sharegpt", "cnn")
RULES = ("oracle", "oracle-step", "adaptive", "heuristic", "grow", "llamacpp-pmin", "vllm-dsd", "trtllm-schedule")
LLAMA_H100 = "cast-h100-sxm-llama-3.1-8b-context-1024.json"


@dataclass
class Verdict:
    dataset: str
    drafter: str
    requests: int
    best_fixed: str
    rows: dict[str, SummaryRow]


def priced_for(drafter: str, costs: CostTable) -> CostTable:
    """The table a drafter's cycles are priced with: an n-gram lookup drafts for free (a what-if, said so)."""
    if drafter == "eagle":
        return costs
    return replace(costs, draft_seconds={b: 0.0 for b in costs.draft_seconds},
                   source=costs.source + "; n-gram drafting priced at 0 (what-if)")


def bench_traces(folder: Path, work: Path, costs: CostTable, drafter: str = "eagle",
                 on_dataset: Callable[[str], object] | None = None) -> list[Verdict]:
    """Import each ``combined_{dataset}.jsonl`` of ``folder`` into ``work``, train ``cycle`` on the train side and
    compare on the validation side."""
    costs, verdicts = priced_for(drafter, costs), []
    for dataset in DATASETS:
        if on_dataset:
            on_dataset(dataset)
        store_path = work / f"{dataset}-{drafter}"
        imported = import_specdecode(folder / f"combined_{dataset}.jsonl", store_path, drafter)
        sizes = imported.store.candidates
        cycle_path = work / f"cycle-{dataset}-{drafter}"
        costs_file = work / f"costs-{drafter}.json"
        costs.save(costs_file)
        if not cycle_path.exists():
            train(TrainArgs(policy="cycle", sweep=store_path, out=cycle_path, costs=costs_file))
        held = SweepStore.load(store_path, split="validation")
        names = [f"fixed{b}" for b in sizes if b > 1] + list(RULES) + [f"cycle:{cycle_path}"]
        policies = [create_policy(name, sizes) for name in names]
        results = evaluate_replay(held, policies, costs=costs)
        speed = {r.policy: r.column("ar_seconds").sum() / r.column("seconds").sum() for r in results}
        best = max((n for n in speed if n.startswith("fixed")), key=speed.get)
        rows = {row.policy: row for row in summarize(results, baseline=best, oracle="oracle-step")}
        verdicts.append(Verdict(dataset, drafter, len(results[0].prompts), best, rows))
    return verdicts


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    """A markdown table: per dataset, speed over plain AR of the best fixed K, and ratios to it (paired 95% CI)."""
    def ratio(row: SummaryRow) -> str:
        low, high = row.vs_baseline_ci95
        return f"{row.vs_baseline:.3f} ({low:.3f}-{high:.3f})"

    def share(row: SummaryRow) -> str:
        return f"{100 * row.gain_share:.0f}%"

    lines = ["| data | drafter | held-out requests | best fixed | its speedup | per-prompt oracle | per-step oracle | "
             "adaptive (share) | cycle (share) |", "|---|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        r = v.rows
        cycle = next(row for name, row in r.items() if name.startswith("cycle"))
        lines.append(f"| {v.dataset} | {v.drafter} | {v.requests} | {v.best_fixed} | {r[v.best_fixed].speedup:.2f}x | "
                     f"{ratio(r['oracle'])} | {ratio(r['oracle-step'])} | {ratio(r['adaptive'])} "
                     f"({share(r['adaptive'])}) | {ratio(cycle)} ({share(cycle)}) |")
    return lines
