"""Tutorial 1: compare block-size policies from Python (what `specpolicy compare` does)."""

from common import SAMPLES, WORKDIR

from specpolicy.data.registry import load_prompts
from specpolicy.evaluate import evaluate_replay, summarize
from specpolicy.registry import create_policy
from specpolicy.report import plot_comparison
from specpolicy.sweep.run import SweepSettings, run_sweep

# 1. Sweep held-out ShareGPT prompts once; exact replay gives every candidate's tau.
settings = SweepSettings(dataset="sharegpt", max_samples=SAMPLES, max_new_tokens=128)
store = run_sweep(settings, str(WORKDIR / "sweep-sharegpt"), load_prompts("sharegpt", SAMPLES))

# 2. Evaluate policies on the stored tables (no more decoding).
policies = [create_policy(name) for name in ("fixed16", "blockpilot", "oracle")]
results = evaluate_replay(store, policies)

# 3. Read the summary: tau, modelled speedup, oracle agreement, gap closed, paired intervals.
for row in summarize(results):
    print(row["policy"], row["tau"], row["speedup"], row.get("gap_closed"), row.get("delta_ci95"))
plot_comparison(results, WORKDIR / "compare.png")
