"""Tutorial 10: a per-step block-size policy deployed inside llama.cpp's server, then measured there."""

from common import SAMPLES, WORKDIR

from specpolicy.engines.build import find_server, gguf_pair, patched
from specpolicy.engines.llamacpp import ServerPool
from specpolicy.evaluation.engine import PLAIN, engine_setting, evaluate_engine, for_engine
from specpolicy.evaluation.engine_compare import calibrate
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import prompt_observation
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR

# 1. The engine and the pair in it: llama-server with specpolicy's patch set (`specpolicy engine build`), and
#    the shipped pair as GGUF files.
binary = find_server()
folder = gguf_pair("tiny", "tiny", WORKDIR / "gguf", report=lambda line: None)
print("patched server (per-request settings, per-step plans):", patched(binary))

# 2. Held-out prompts as token ids (the shipped sweep's).
store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
records = list(store.records())[: max(6, SAMPLES // 4)]
sizes = [1, 2, 4, 8, 12, 16]

# all stop at the end
with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", threads=1) as pool:
    # 3. The engine's own cost table: a few prompts decoded at every block size, timed by the server.
    costs = calibrate(pool, store, records[:3], threads=1)
    print("llama.cpp, ms per cycle:", {b: round(costs.cycle_seconds(b) * 1000, 2) for b in sizes},
          f"plain server {costs.ar_seconds * 1000:.2f}")

    # 4. A per-step policy's plan for one prompt is a value the engine runs itself: the cost-aware rule
    #    (`adaptive`, the default's guard) choosing every step's B (1: a plain step), priced with the engine's
    #    table. (The default itself decodes a prompt plainly where BlockPilot starts it plainly and no block
    # could
    #    pay under this table: plain decoding's server, no drafter.)
    rule = create_policy("adaptive", sizes)
    record = records[0]
    plan = rule.checked_plan(prompt_observation(store, record, costs))
    prompt = list(record.replay.sequence[: record.prompt_length])
    reply = pool[engine_setting(rule, plan, 16, per_request=True)].complete(prompt, 64)
    print("the engine's steps, B:", [step.block for step in reply.steps][:24])
    print("replay's cycles,    B:",
          [c.block_size for c in record.table().simulate(plan, store.features(record))][:24])
    print("same tokens as plain decoding:", reply.tokens == pool[PLAIN].complete(prompt, 64).tokens)

    # 5. Measured side by side, order rotating per prompt: each policy over the engine's own plain decoding.
    names = ["fixed16", "fixed4", "blockpilot", "adaptive", "blockpilot-guard", "llamacpp-pmin"]
    policies = [for_engine(create_policy(name, sizes), sizes) for name in names]
    run = evaluate_engine(pool, store, policies, costs=costs, records=records)

print(f"\n{'policy':<17}{'speedup':>8}{'vs fixed16':>11}{'95% CI':>12}{'tau':>6}")
for row in summarize(run.results):
    low, high = row.vs_baseline_ci95
    print(f"{row.policy:<17}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x{low:>6.2f}-{high:<5.2f}"
          f"{row.tau:>6.2f}")
print(f"outputs differing from plain decoding: {len(run.lossless_failures())} of {len(run.replies)}")
