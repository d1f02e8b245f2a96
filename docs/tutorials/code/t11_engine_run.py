"""Tutorial 11: bring your engine's run. The shipped pair's decodes at a fixed block of 8, written as three
engines record them (SGLang's detailed stats, vLLM's per-choice stats, dflash-mlx's cycle events), imported,
replayed exactly and priced; then a cost table fitted from an engine's own verify timings, its cliff named."""

import json
import subprocess
import sys
import textwrap

from common import SAMPLES, WORKDIR

from specpolicy.bench.from_run import fit_csv
from specpolicy.evaluation.compare import compare_sweep
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import import_traces
from specpolicy.zoo import ZOO_DIR

BLOCK = 8
SHIPPED = ZOO_DIR / "sweeps" / "sharegpt"
COSTS = str(SHIPPED / "latency.json")  # the shipped pair's cost table, measured on the machine that built it

# 1. Each engine's run, as the engine writes it. The decodes are the shipped sweep's at B = 8: per request,
#    each step's accepted drafts and the output's length (what a server started with the switch records).
shipped = SweepStore.load(SHIPPED)


def decodes(block):
    """Per request id: each step's accepted drafts at ``block`` and the output's length."""
    out = {}
    for record in list(shipped.records())[:SAMPLES]:
        cycles = record.table().simulate(block)
        rid = record.prompt_id.split(":")[-1]
        out[rid] = ([c.accepted for c in cycles], 1 + sum(c.committed for c in cycles))
    return out


runs = decodes(BLOCK)
steps = sum(len(accepted) for accepted, _ in runs.values())
print(f"the shipped sweep's decodes of these {len(runs)} prompts at B = {BLOCK}: tau "
      f"{sum(tokens - 1 for _, tokens in runs.values()) / steps:.3f}\n")


def write(name, lines):
    path = WORKDIR / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# SGLang, `--speculative-decoding-stats detailed`: native responses, `meta_info.speculative_decoding_stats`
def sglang_run(runs, block):
    return write(f"sglang-b{block}.jsonl", [
        {"text": "...", "meta_info": {"id": rid, "completion_tokens": tokens, "speculative_decoding_stats": {
            "verify_lengths": [block] * len(steps), "accept_lengths": [a + 1 for a in steps],
            "num_verified_draft_tokens": (block - 1) * len(steps), "num_accepted_draft_tokens": sum(steps)}}}
        for rid, (steps, tokens) in runs.items()])


sglang = sglang_run(runs, BLOCK)
# vLLM, `--per-request-spec-decode-stats detailed`: OpenAI responses, per choice
vllm = write("vllm-b8.jsonl", [
    {"id": rid, "object": "chat.completion", "usage": {"completion_tokens": tokens},
     "choices": [{"index": 0, "speculative_decoding_stats": {
         "num_spec_tokens": BLOCK - 1, "num_spec_steps": len(steps), "num_accepted_draft_tokens": sum(steps),
         "per_step_accepted": steps, "per_step_drafted": [BLOCK - 1] * len(steps)}}]}
    for rid, (steps, tokens) in runs.items()])


# dflash-mlx, DFLASH_BENCH_LOG_DIR: cycle_events.jsonl, one line a cycle with its own cost (here a synthetic
# Apple-like curve: 40 ms + 1.5 ms a verified row, the drafter 6 ms); its last block capped at the tokens left
def cycle_events(rid, steps, tokens):
    produced = 1
    for n, accepted in enumerate(steps, 1):
        width = min(BLOCK, tokens - produced)
        accepted = min(accepted, width - 1)
        produced += accepted + 1
        yield {"request_id": rid, "cycle": n, "block_len": width, "commit_count": accepted + 1,
               "acceptance_len": accepted, "verify_token_count": width, "draft_us": 6_000.0,
               "verify_us": 40_000.0 + 1_500.0 * width}


mlx = write("cycle_events.jsonl", [line for rid, run in runs.items() for line in cycle_events(rid, *run)])

# 2. Import each (the format is told apart by the first line) and replay the recorded block, priced by the
#    shipped table: every store replays the shipped sweep's decodes exactly (same tau, same speedup).
print(f"{'record':<12}{'requests':>9}{'fixed8 over AR':>16}{'tau':>7}   replay is exact for")
for name, path in (("SGLang", sglang), ("vLLM", vllm), ("dflash-mlx", mlx)):
    imported = import_traces(path, WORKDIR / f"store-{path.stem}")
    store, exact = imported.store.path, imported.exact_for.split(" (")[0]
    row = compare_sweep(store, ["fixed8"], costs=[COSTS], baseline="fixed8", oracle="fixed8")[0].row
    print(f"{name:<12}{row.prompts:>9}{row.speedup:>15.3f}x{row.tau:>7.3f}   {exact}")

# 3. A cost table from the engine's own timings: verify seconds by rows verified (a CSV a user writes from
#    their engine's log; here a synthetic curve with a kernel switch at 12 rows, as MLX's has had), the
#    drafter's pass measured apart. The cliff is named, and the table prices any store.
widths = (1, 2, 4, 8, 10, 12, 14, 16)
curve = {rows: 0.040 + 0.0015 * rows + (0.030 if rows >= 12 else 0.0) for rows in widths}
csv = WORKDIR / "verify-timings.csv"
csv.write_text("tokens,seconds\n" + "".join(f"{rows},{seconds}\n" for rows, seconds in curve.items()))
fitted = fit_csv(csv, draft_seconds=0.006)
print(f"\n{'rows verified':>13}{'verify ms':>11}  cliff")
for row in (r for r in fitted.rows() if r["cycles"]):  # the widths measured
    print(f"{row['tokens verified']:>13}{row['verify ms']:>11.1f}  {row['cliff']}".rstrip())
print("\n".join(f"note: {warning}" for warning in fitted.table.warnings))
table = WORKDIR / "engine-costs.json"
fitted.table.save(table)
row = compare_sweep(WORKDIR / "store-sglang-b8", ["fixed8"], costs=[table], baseline="fixed8",
                    oracle="fixed8")[0].row
print(f"\nthe SGLang run priced by that table: fixed8 {row.speedup:.2f}x plain decoding (tau {row.tau:.2f})")
own = compare_sweep(WORKDIR / "store-cycle_events", ["fixed8"], baseline="fixed8", oracle="fixed8")[0].row
print(f"the dflash-mlx run priced by its own cycles' timings (fitted on import): fixed8 {own.speedup:.2f}x")

# 4. Several runs, one store: the same prompts served at B = 4, 8 and 16 (three SGLang runs) import into one
#    store keyed by request id, each block replaying its own run exactly, so a choice per prompt over them is
#    exact too: the per-prompt oracle is the fastest recorded run of each prompt. Priced by the engine's own
#    table (its cliff makes 16 rows dear), then the best constant written in each engine's own flags.
paths = [sglang_run(decodes(block), block) for block in (4, 16)] + [sglang]
store = import_traces(paths, WORKDIR / "store-sglang-runs").store.path
rows = compare_sweep(store, ["fixed4", "fixed8", "fixed16", "oracle"], costs=[table], baseline="fixed16")
print(f"\n{'policy':<10}{'over AR':>9}{'vs fixed16':>12}   (three runs, one store, the engine's table)")
for row in (r.row for r in rows):
    print(f"{row.policy:<10}{row.speedup:>8.2f}x{row.vs_baseline:>11.2f}x")
best = max((r.row for r in rows if r.row.policy.startswith("fixed")), key=lambda row: row.speedup).policy
# export simulates serving, so it prices with a batch table (a shipped H200 one); the flags are its output
command = ["export", best, "--sweep", str(store), "--batch-sizes", "1", "--drafter",
           "z-lab/Qwen3-8B-DFlash-b16", "--batch-costs", "aic-h200-sxm-sglang-qwen3-8b-dflash-context-1024"]
exported = subprocess.run([sys.executable, "-m", "specpolicy.cli", *command], capture_output=True, text=True,
                          check=True)
configs = json.loads(exported.stdout)
print(f"\n{best} in each engine's own terms:")
for key in ("sglang_args", "mlx_vlm_args", "dflash_mlx_args", "vllm_speculative_config"):
    text = " ".join(configs[key]) if isinstance(configs[key], list) else json.dumps(configs[key])
    print(textwrap.fill(f"{key}: {text}", width=100, initial_indent="  ", subsequent_indent="      "))
