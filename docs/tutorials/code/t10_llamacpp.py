"""Tutorial 10: deploy a per-prompt block-size policy into running llama.cpp servers and measure it there."""

from common import SAMPLES, WORKDIR

from specpolicy.engines.build import convert_pair, find_server
from specpolicy.engines.llamacpp import ServerPool, Setting
from specpolicy.evaluation.engine import PLAIN, engine_costs, evaluate_engine, for_engine
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import prompt_observation
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import DRAFTER_DIR, TARGET_DIR, ZOO_DIR

# 1. The engine and the pair in it: llama-server (`specpolicy engine build`), the shipped pair as GGUF files.
binary = find_server()
convert_pair(TARGET_DIR, DRAFTER_DIR, WORKDIR / "gguf", report=lambda line: None)
target, drafter = WORKDIR / "gguf" / "target.gguf", WORKDIR / "gguf" / "drafter.gguf"

# 2. Held-out prompts as token ids (the shipped sweep's), and the block sizes llama.cpp runs with this drafter.
store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
records = list(store.records())[: max(6, SAMPLES // 4)]
sizes = [1, 2, 4, 8, 12, 16]

with ServerPool(binary, target, drafter, threads=1) as pool:  # every server stops when the block ends
    # 3. The engine's own cost table: a few prompts decoded at every block size, timed by the server.
    fixed = [create_policy(f"fixed{b}", sizes) for b in sizes]
    costs = engine_costs(evaluate_engine(pool, store, fixed, records=records[:3]), threads=1)
    print("llama.cpp, ms per target pass:", {b: round(costs.cycle_seconds(b) * 1000, 2) for b in sizes})

    # 4. Deploy BlockPilot by hand: after prefill it picks B for the prompt, and the request goes to the server
    #    started with that setting (llama.cpp takes no per-request speculation settings: a setting is a server).
    blockpilot = for_engine(create_policy("blockpilot", sizes), sizes)
    for record in records[:3]:
        block_size = blockpilot.select(prompt_observation(store, record, costs))
        reply = pool[Setting(block_size)].complete(list(record.replay.sequence[: record.prompt_length]), 64)
        plain = pool[PLAIN].complete(list(record.replay.sequence[: record.prompt_length]), 64)
        print(f"{record.prompt_id:<22} B = {block_size:<3} {reply.seconds * 1000:6.1f} ms  plain "
              f"{plain.seconds * 1000:6.1f} ms  same tokens: {reply.tokens == plain.tokens}")

    # 5. Measured side by side, order rotating per prompt: each policy over the engine's own plain decoding.
    names = ["fixed16", "fixed4", "blockpilot", "llamacpp-pmin", "oracle"]
    policies = [for_engine(create_policy(name, sizes), sizes) for name in names]
    run = evaluate_engine(pool, store, policies, costs=costs, records=records)

print(f"\n{'policy':<15}{'speedup':>8}{'vs fixed16':>11}{'95% CI':>12}{'tau':>6}")
for row in summarize(run.results):
    low, high = row.vs_baseline_ci95
    print(f"{row.policy:<15}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x{low:>6.2f}-{high:<5.2f}{row.tau:>6.2f}")
print(f"outputs differing from plain decoding: {len(run.lossless_failures())} of {len(run.replies)}")
