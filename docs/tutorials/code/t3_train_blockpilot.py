"""Tutorial 3: train BlockPilot from a sweep of training prompts, then rerun the paper's ablations."""

from common import SAMPLES, WORKDIR

from specpolicy.data.registry import load_prompts
from specpolicy.evaluate import evaluate_replay, summarize
from specpolicy.registry import create_policy
from specpolicy.sweep.run import SweepSettings, run_sweep
from specpolicy.train import TrainArgs, main

# 1. Sweep training prompts (never the held-out ones) and held-out prompts for testing.
train_store = run_sweep(SweepSettings(dataset="sharegpt-train", max_samples=2 * SAMPLES),
                        str(WORKDIR / "sweep-train"), load_prompts("sharegpt-train", 2 * SAMPLES))
test_store = run_sweep(SweepSettings(dataset="sharegpt", max_samples=SAMPLES),
                       str(WORKDIR / "sweep-sharegpt"), load_prompts("sharegpt", SAMPLES))

# 2. Train the paper's configuration, its shuffled-label control, and the ablations.
variants = {
    "paper": TrainArgs(hidden=256, lr=1e-4),
    "shuffled": TrainArgs(hidden=256, lr=1e-4, shuffle_labels=True),
    "hidden-1024": TrainArgs(hidden=1024, lr=1e-4),
    "depth-1": TrainArgs(hidden=256, depth=1, lr=1e-4),
    "depth-3": TrainArgs(hidden=256, depth=3, lr=1e-4),
    "softmax-input": TrainArgs(hidden=256, lr=1e-4, preprocess="softmax"),
    "normalised-input": TrainArgs(hidden=256, lr=1e-4, preprocess="normalised"),
}
names = ["fixed16", "oracle"]
for name, args in variants.items():
    args.policy, args.sweep, args.out, args.epochs = "blockpilot", train_store.path, WORKDIR / f"bp-{name}", 40
    summary = main(args)
    print(f"{name:18s} validation accuracy {summary['validation_accuracy']:.3f} "
          f"(majority class {summary['majority_class_validation_accuracy']:.3f})")
    names.append(f"blockpilot:{args.out}")

# 3. Evaluate every variant on the held-out sweep.
results = evaluate_replay(test_store, [create_policy(n) for n in names])
for row in summarize(results):
    print(f"{row['policy'][-40:]:40s} tau {row['tau']:.3f}  gap closed {row.get('gap_closed')}")
