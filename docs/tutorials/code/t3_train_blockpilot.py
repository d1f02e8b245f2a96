"""Tutorial 3: train BlockPilot to predict cycles per token, price it on two machines, and set it beside
a time-label classifier and the paper's protocol."""

from pathlib import Path

from common import WORKDIR

from specpolicy.costs import CostTable
from specpolicy.defaults import PAPER_CANDIDATES, WIDE_CANDIDATES
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.training.train import TrainArgs, main
from specpolicy.zoo import ZOO_DIR

# 1. The zoo ships a replay sweep of 480 training-split prompts (train on it) and one of 200 held-out
#    prompts (test on it, never train). Make your own with `specpolicy sweep --dataset sharegpt-train`.
train_sweep, test_sweep = ZOO_DIR / "sweeps" / "sharegpt-train", ZOO_DIR / "sweeps" / "sharegpt"

# 2. Train the portable default (cycles per token of every candidate), its control on outcomes shuffled
#    across prompts, a classifier of this machine's fastest candidate, and the paper's tau classifier.
variants = {
    "cycles": TrainArgs(candidates=WIDE_CANDIDATES),
    "cycles-shuffled": TrainArgs(candidates=WIDE_CANDIDATES, shuffle_labels=True),
    "time-labels": TrainArgs(candidates=WIDE_CANDIDATES, objective="cross_entropy"),
    "paper": TrainArgs(candidates=PAPER_CANDIDATES, label="tau", objective="cross_entropy",
                       preprocess="logits",
                       weight_decay=0.0),
}
trained = {}
for name, args in variants.items():
    args.sweep, args.out = train_sweep, WORKDIR / f"bp-{name}"
    summary = main(args)
    # early stopping kept the fastest epoch on validation prompts
    if summary["predicts"] == "cycles_per_token":
        print(f"{name:16s} validation: modelled time {-summary['validation_score']:.3f} of plain AR's")
    else:
        print(f"{name:16s} validation accuracy {summary['validation_accuracy']:.3f} "
              f"(majority class {summary['majority_class_validation_accuracy']:.3f})")
    trained[name] = f"blockpilot:{args.out}"

# 3. Test on the held-out sweep, priced with this machine's table and with a synthetic GPU-shaped one
#    (a cycle costs nearly the same at every B): the same predictions, re-priced.
fixtures = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
test = SweepStore.load(test_sweep)
gpu_shaped = CostTable.load(fixtures / "costs-gpu-shaped-synthetic.json")
for machine, costs in (("this CPU", None), ("GPU-shaped", gpu_shaped)):
    print(f"\npriced on {machine}")
    names = ["fixed1", "fixed8", "fixed16",
             *(trained[v] for v in ("cycles", "cycles-shuffled", "time-labels")),
             "oracle"]
    policies = [create_policy(n, WIDE_CANDIDATES) for n in names]
    results = evaluate_replay(test, policies, costs=costs, candidates=WIDE_CANDIDATES)
    for row, policy in zip(summarize(results, oracle="oracle"), policies):
        low, high = row.vs_baseline_ci95
        label = policy.name.split(":")[-1].split("bp-")[-1]
        print(f"{label:16s} vs fixed16 {row.vs_baseline:.3f}x [{low:.3f}, {high:.3f}]  tau {row.tau:.2f}")

# 4. The paper's protocol: tau labels over 14..18, against the tau oracle.
policies = [create_policy(n, PAPER_CANDIDATES) for n in ("fixed16", trained["paper"], "oracle-tau")]
print("\nthe paper's setting (14..18)")
for row, name in zip(summarize(evaluate_replay(test, policies, candidates=PAPER_CANDIDATES),
                               oracle="oracle-tau"),
                     ("fixed16", "paper", "oracle-tau")):
    low, high = row.vs_baseline_ci95
    print(f"{name:16s} vs fixed16 {row.vs_baseline:.3f}x [{low:.3f}, {high:.3f}]  tau {row.tau:.2f}")
