"""Tutorial 3: train BlockPilot on time labels from the shipped training sweep, with the paper's protocol beside it."""

from common import WORKDIR

from specpolicy.defaults import PAPER_CANDIDATES, WIDE_CANDIDATES
from specpolicy.evaluate import evaluate_replay
from specpolicy.metrics import summarize
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.train import TrainArgs, main
from specpolicy.zoo import ZOO_DIR

# 1. The zoo ships a replay sweep of 480 training-split prompts (train on it) and one of 200 held-out
#    prompts (test on it, never train). Make your own with `specpolicy sweep --dataset sharegpt-train`.
train_sweep, test_sweep = ZOO_DIR / "sweeps" / "sharegpt-train", ZOO_DIR / "sweeps" / "sharegpt"

# 2. Train on time labels over the whole range (the default), the paper's tau labels over 14..18,
#    and the control on shuffled outcomes that must do no better than a constant.
variants = {
    "time": TrainArgs(candidates=WIDE_CANDIDATES),
    "time-shuffled": TrainArgs(candidates=WIDE_CANDIDATES, shuffle_labels=True),
    "time-depth-1": TrainArgs(candidates=WIDE_CANDIDATES, depth=1),
    "paper": TrainArgs(candidates=PAPER_CANDIDATES, label="tau"),
}
trained = {}
for name, args in variants.items():
    args.sweep, args.out, args.hidden, args.lr, args.epochs = train_sweep, WORKDIR / f"bp-{name}", 256, 1e-4, 40
    summary = main(args)
    print(f"{name:14s} validation accuracy {summary['validation_accuracy']:.3f} "
          f"(majority class {summary['majority_class_validation_accuracy']:.3f})")
    trained[name] = f"blockpilot:{args.out}"

# 3. Test on the held-out sweep: pooled speed against fixed16 with paired intervals.
test = SweepStore.load(test_sweep)
for candidates, names, oracle in ((WIDE_CANDIDATES, ["time", "time-shuffled", "time-depth-1"], "oracle"),
                                  (PAPER_CANDIDATES, ["paper"], "oracle-tau")):
    policies = [create_policy(n, candidates) for n in ["fixed16", *(trained[v] for v in names), oracle]]
    for row, name in zip(summarize(evaluate_replay(test, policies, candidates=candidates), oracle=oracle),
                         ["fixed16", *names, oracle]):
        low, high = row.vs_baseline_ci95
        print(f"{name:14s} vs fixed16 {row.vs_baseline:.3f}x [{low:.3f}, {high:.3f}]  tau {row.tau:.3f}")
