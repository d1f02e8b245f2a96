"""Tutorial 8: the second knob. Block size B, verify length L, and both, at batch 1 and under load."""

import json

import matplotlib.pyplot as plt
import torch
from common import SAMPLES, WORKDIR

from specpolicy.cycles import Plan
from specpolicy.data.registry import load_prompts
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.evaluation.export import export_for_engines
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.evaluation.report import save_figure
from specpolicy.evaluation.serving import evaluate_serving
from specpolicy.models import load_pair
from specpolicy.registry import create_policy
from specpolicy.sweep.batch_latency import measure_batch_costs
from specpolicy.sweep.run import run_sweep
from specpolicy.sweep.settings import SweepSettings

torch.set_num_threads(1)
CANDIDATES = [1, 2, 4, 8, 12, 16, 24, 32]
PROMPTS = max(3, SAMPLES // 2)

# 1. A sweep for verify lengths: every anchor a cut block can land on is replayed, and the drafter's
#    confidence in each draft is recorded for every block size (what verify rules read).
settings = SweepSettings(dataset="sharegpt", max_samples=PROMPTS, candidates=CANDIDATES, verify_lengths=True,
                         confidence_sizes=[b for b in CANDIDATES if b > 1])
store = run_sweep(settings, str(WORKDIR / "sweep-verify"), load_prompts("sharegpt", PROMPTS))
print(f"sweep: {len(store.done_ids())} held-out prompts x {len(store.candidates)} block sizes, with "
      f"confidences")

# 2. Policies that choose B, L, or both (see Concepts), and the two oracles.
names = {"fixed16": "-", "adaptive": "B", "marginal16": "L", "adaptive-verify": "B, L", "oracle-step": "B",
         "oracle-verify": "B, L"}
policies = [create_policy(name, CANDIDATES) for name in names]


def show(results, title):
    print(f"\n{title}\n{'policy':<17}{'chooses':>8}{'over AR':>9}{'vs fixed16':>11}{'95% CI':>12}{'gain':>6}")
    for row in summarize(results, baseline="fixed16", oracle="oracle-verify"):
        low, high = row.vs_baseline_ci95
        print(f"{row.policy:<17}{names[row.policy]:>8}{row.speedup:>8.2f}x{row.vs_baseline:>10.2f}x"
              f"{low:>6.2f}-{high:<5.2f}{row.gain_share:>6.2f}")


# 3. Batch 1: one request at a time, priced with the sweep's own cost table (modelled time).
show(evaluate_replay(store, policies),
     "batch 1 (modelled; gain = share of oracle-verify's gain over fixed16)")

# 3b. Why L is a knob: every prompt replayed at fixed (B, L), the same drafts verified to different lengths.
#     Per cycle: tokens committed, cost in AR steps (draft of B + verify of L); pooled: tokens / cost =
# speedup.
tables, costs = [r.table() for r in store.records()], store.latency()
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
for size in (8, 16, 32):
    lengths, tokens, cost = range(1, size + 1), [], []
    for length in lengths:
        cycles = [c for table in tables for c in table.simulate(Plan.fixed(size, length))]
        tokens.append(sum(c.committed for c in cycles) / len(cycles))
        cost.append(costs.cycles_seconds(cycles) / costs.ar_seconds / len(cycles))
    speed = [t / c for t, c in zip(tokens, cost)]
    best = max(range(size), key=speed.__getitem__)
    print(f"B = {size:>2}: L = B {speed[-1]:.2f}x over AR, best L = {best + 1:>2} {speed[best]:.2f}x")
    for axis, values in zip(axes, (tokens, cost, speed)):
        axis.plot(lengths, values, marker=".", label=f"B = {size}")
    axes[2].plot(best + 1, speed[best], "k*", markersize=10)
for axis, label in zip(axes,
                       ("tokens committed per cycle", "cycle cost (AR steps)", "pooled speedup over AR")):
    axis.set_xlabel("verify length L")
    axis.set_ylabel(label)
axes[2].axhline(1.0, color="0.5", linewidth=1, linestyle="--")
axes[0].legend()
fig.suptitle("fixed (B, L) on every prompt: the same drafts, verified to different lengths "
             "(modelled; star: the best L for each B)")
save_figure(fig, WORKDIR / "block-and-verify.png")

# 4. Under load: measure what batched passes cost here, then serve 8 requests at a time.
pair = load_pair("tiny", "tiny", "float32", "cpu")
batch = measure_batch_costs(SpeculativeDecoder(pair.target, pair.drafter), range(1, 9), [1, 2, 4, 8, 16, 32],
                            repeats=7 if SAMPLES >= 24 else 3)
batch.save(WORKDIR / "batch-costs.json")
print(f"\ntarget pass, batch 8: {1e3 * batch.verify[8][1]:.0f} ms for 1 token each, "
      f"{1e3 * batch.verify[8][16]:.0f} ms for 16 each (batch 1: {1e3 * batch.verify[1][1]:.0f} / "
      f"{1e3 * batch.verify[1][16]:.0f} ms)")
show(evaluate_serving(store, policies, batch, 8), "concurrency 8 (modelled serving simulation)")

# 5. What an engine can run: vLLM drafts one block every step and narrows the verified drafts per batch size;
#    SGLang runs one block size. Export the configuration of each that runs the policy as closely as the
# engine
#    can, and beside it the fastest static one for this sweep, each priced as the engine runs it.
document = export_for_engines(create_policy("adaptive-verify", CANDIDATES), store, batch, (1, 2, 4, 8),
                              "tiny",
                              fastest=True)
print(f"\n{'batch':<6}{'adaptive-verify':>16}{'its vLLM':>10}{'its SGLang':>12}{'fastest vLLM':>14}"
      f"{'fastest SGLang':>16}   (tokens/s, modelled)")
for row in document["per_batch_size"]:
    print(f"{row['batch_size']:<6}{row['policy_tokens_per_s']:>16.0f}{row['vllm_tokens_per_s']:>10.0f}"
          f"{row['sglang_tokens_per_s']:>12.0f}{row['fastest_vllm_tokens_per_s']:>14.0f}"
          f"{row['fastest_sglang_tokens_per_s']:>16.0f}")
print("vLLM speculative_config:", json.dumps(document["vllm_speculative_config"]))
print("SGLang flags:", " ".join(document["sglang_args"]) or "(none: speculation off)")
print("fastest static vLLM:", json.dumps(document["fastest_static"]["vllm_speculative_config"]))
print("fastest static SGLang:",
      " ".join(document["fastest_static"]["sglang_args"]) or "(none: speculation off)")
