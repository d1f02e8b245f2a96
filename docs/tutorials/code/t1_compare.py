"""Tutorial 1: compare block-size policies from Python (what `specpolicy compare --sweep` does)."""

from common import SAMPLES, WORKDIR

from specpolicy.data.registry import load_prompts
from specpolicy.defaults import WIDE_CANDIDATES
from specpolicy.evaluation.metrics import split_by, summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.evaluation.report import plot_by_label, plot_comparison
from specpolicy.registry import create_policy
from specpolicy.sweep.run import run_sweep
from specpolicy.sweep.settings import SweepSettings
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR

# 1. A sweep decodes each prompt once and replays every candidate block size exactly. The zoo ships
#    one over its 200 held-out ShareGPT prompts; this is how to make your own (a few prompts here):
own = run_sweep(SweepSettings(dataset="sharegpt", max_samples=SAMPLES), str(WORKDIR / "sweep-sharegpt"),
                load_prompts("sharegpt", SAMPLES))
print(f"own sweep: {len(own.done_ids())} prompts x {len(own.candidates)} block sizes {list(own.candidates)}")

# 2. Evaluate policies on the shipped sweep: replayed cycles priced with its cost table (modelled time).
store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
names = ["fixed1", "fixed8", "fixed16", "blockpilot", "adaptive", "blockpilot-guard", "oracle",
         "oracle-step"]
results = evaluate_replay(store, [create_policy(n, WIDE_CANDIDATES) for n in names],
                          candidates=WIDE_CANDIDATES)

# 3. Pooled speedup over plain AR, speed vs fixed16 with its paired 95% interval, per-prompt p10 and
#    median, tau, and the share of the per-prompt time oracle's gain.
print(f"{'policy':<17}{'speedup':>8}{'vs fixed16':>11}{'95% CI':>12}{'p10':>6}{'median':>7}{'tau':>6}"
      f"{'gain':>6}")
for row in summarize(results):
    low, high = row.vs_baseline_ci95
    print(f"{row.policy:<17}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x{low:>6.2f}-{high:<5.2f}"
          f"{row.p10_speedup:>6.2f}{row.median_speedup:>7.2f}{row.tau:>6.2f}{row.gain_share:>6.2f}")
plot_comparison(results, WORKDIR / "compare.png", title="200 held-out ShareGPT prompts, modelled time")

# 4. Per category: the zoo's Spec-Bench sweep (240 prompts, 40 per task group) priced with the same table,
#    a row per group and one over all (what `specpolicy compare --by group` prints). Any sweep whose
#    prompts carry a category splits this way, including your own JSONL with a "category" field.
bench = SweepStore.load(ZOO_DIR / "sweeps" / "spec-bench")
groups = {record.prompt_id: record.group for record in bench.records()}
names = ["fixed16", "blockpilot-guard", "oracle-step"]
results = evaluate_replay(bench, [create_policy(n, WIDE_CANDIDATES) for n in names], costs=store.latency(),
                          candidates=WIDE_CANDIDATES)
print(f"\n{'group':<15}{'policy':<18}{'speedup':>8}{'vs fixed16':>11}{'95% CI':>12}")
for group, part in split_by(results, groups):
    for row in summarize(part):
        low, high = row.vs_baseline_ci95
        print(f"{group:<15}{row.policy:<18}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x"
              f"{low:>6.2f}-{high:<5.2f}")
plot_by_label(split_by(results, groups), WORKDIR / "by-group.png", "group", title="Spec-Bench, modelled time")

# 5. The serving engines' own rules (vLLM, llama.cpp, TensorRT-LLM; engine parameter names as arguments) on
#    the zoo's confidence sweep: the same 200 held-out prompts, with verify lengths and drafter confidences.
verify = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt-verify")
names = ["fixed16", "blockpilot-guard", "vllm-adaptive", "llamacpp-pmin", "trtllm-schedule", "marginal",
         "oracle-verify"]
results = evaluate_replay(verify, [create_policy(n, WIDE_CANDIDATES) for n in names])
print(f"\n{'policy':<17}{'speedup':>8}{'vs fixed16':>11}{'95% CI':>12}{'p10':>6}{'tau':>6}")
for row in summarize(results, oracle="oracle-verify"):
    low, high = row.vs_baseline_ci95
    print(f"{row.policy:<17}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x{low:>6.2f}-{high:<5.2f}"
          f"{row.p10_speedup:>6.2f}{row.tau:>6.2f}")
