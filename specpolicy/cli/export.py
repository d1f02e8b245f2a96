"""``specpolicy export POLICY --sweep DIR --batch-costs FILE``: a policy as the static knobs engines read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from specpolicy.cli.common import fail, stderr


def export(
    policy: str = typer.Argument(..., help="a policy name, e.g. adaptive-verify or blockpilot-guard"),
    sweep: Path = typer.Option(..., help="a replay sweep store the policy is simulated on"),
    batch_costs: Path = typer.Option(..., help="batch cost table (`specpolicy bench batch-latency --out FILE`)"),
    batch_sizes: str = typer.Option("1-8", help="concurrencies to export a size for, e.g. 1-8"),
    drafter: str = typer.Option("z-lab/Qwen3-8B-DFlash-b16", help="drafter named in the vLLM config"),
    out: Path = typer.Option(None, help="write the JSON here instead of stdout"),
) -> None:
    """Simulate POLICY serving at each concurrency and export its verified drafts per batch size as vLLM's
    Dynamic SD schedule and SGLang's DFlash flag (engines verify what they draft: B = L there)."""
    from specpolicy.batch_costs import BatchCostTable
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.evaluate import StoredPrompts, evaluate_serving
    from specpolicy.export import sglang_args, verified_drafts, vllm_config
    from specpolicy.registry import get_registry
    from specpolicy.sweep.store import SweepStore

    if out is not None and out.is_dir():
        raise fail(f"--out {out} is a folder; pass a file path such as {out / 'export.json'}")
    costs = BatchCostTable.load(batch_costs)
    batches = parse_candidates(batch_sizes)
    if max(batches) > max(costs.batch_sizes):
        raise fail(f"--batch-sizes go to {max(batches)} but {batch_costs} measured up to {max(costs.batch_sizes)}; "
                   f"measure more with `specpolicy bench batch-latency --batch-sizes 1-{max(batches)}`")
    store = SweepStore.load(sweep)
    built = get_registry().create(policy, store.candidates)
    rows, prompts = [], StoredPrompts.load(store)
    for batch in batches:
        served: list = []
        results = evaluate_serving(store, [built], costs, batch, prompts=prompts,
                                   on_served=lambda _, result, seen=served: seen.append(result))
        speedup = float(results[0].column("ar_seconds").sum() / results[0].column("seconds").sum())
        rows.append({"batch_size": batch, "verified_drafts": verified_drafts(served[0].records),
                     "tokens_per_s": round(served[0].throughput, 1), "speedup_over_ar": round(speedup, 3)})
        stderr.print(f"concurrency {batch}: K = {rows[-1]['verified_drafts']}, {served[0].throughput:.0f} tok/s "
                     f"modelled ({speedup:.2f}x over AR at that concurrency)")
    drafts = {r["batch_size"]: r["verified_drafts"] for r in rows}
    document = {"policy": policy, "per_batch_size": rows, "vllm_speculative_config": vllm_config(drafts, drafter),
                "sglang_args": sglang_args(drafts),
                "semantics": "K = drafts the target verifies per step (L - 1); vLLM num_speculative_tokens = K, "
                             "SGLang --speculative-num-draft-tokens = K + 1 (the block, anchor included). Engines "
                             "draft what they verify (B = L); per-cycle choices become one static size per batch size."}
    text = json.dumps(document, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        out.write_text(text + "\n")
        stderr.print(f"wrote {out}")
