"""``specpolicy export POLICY --sweep DIR --batch-costs FILE``: engine configurations priced as engines run them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from specpolicy.cli.common import AllowNoisyOption, fail, stderr
from specpolicy.files import write_text


def export(
    policy: str = typer.Argument(..., help="a policy name, e.g. adaptive-verify or blockpilot-guard"),
    sweep: Path = typer.Option(..., help="a replay sweep store the policy is simulated on"),
    batch_costs: Path = typer.Option(..., help="batch cost table (`specpolicy bench batch-latency --out FILE`)"),
    batch_sizes: str = typer.Option("1-8", help="concurrencies to export a size for, e.g. 1-8"),
    drafter: str = typer.Option(None, help="the drafter's path or hub id on the serving machine, written into the "
                                           "configs (default: a marked placeholder naming the sweep's drafter)"),
    out: Path = typer.Option(None, help="write the JSON here instead of stdout"),
    allow_noisy: bool = AllowNoisyOption,
    fastest: bool = typer.Option(False, help="also search the fastest static configuration of each engine for "
                                             "the sweep, whatever the policy, and print it beside the policy's"),
) -> None:
    """Simulate POLICY serving at each concurrency, then export the vLLM and SGLang configurations that run it
    as closely as each engine can (vLLM: one drafted block, a verify length per batch size; SGLang: one block
    size), each priced by simulating exactly what is exported."""
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.evaluation.serving import export_for_engines
    from specpolicy.registry import get_registry
    from specpolicy.replay.batch_costs import BatchCostTable
    from specpolicy.sweep.store import SweepStore

    if out is not None and out.is_dir():
        raise fail(f"--out {out} is a folder; pass a file path such as {out / 'export.json'}")
    batches = parse_candidates(batch_sizes, "--batch-sizes", block_sizes=False)
    costs = BatchCostTable.load(batch_costs, allow_noisy=allow_noisy)
    if max(batches) > max(costs.batch_sizes):
        raise fail(f"--batch-sizes go to {max(batches)} but {batch_costs} measured up to {max(costs.batch_sizes)}; "
                   f"measure more with `specpolicy bench batch-latency --batch-sizes 1-{max(batches)}`")
    store = SweepStore.load(sweep)
    if not drafter:
        swept = str(store.meta.get("models", {}).get("drafter") or store.meta.get("drafter", ""))
        drafter = f"<SET ME: the serving machine's path of {swept}>"
        stderr.print(f"note: the configs name the drafter as {drafter!r}; pass --drafter PATH for the serving "
                     "machine")
    document = export_for_engines(get_registry().create(policy, store.candidates), store, costs, batches, drafter,
                                  on_batch=stderr.print, fastest=fastest)
    text = json.dumps(document, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        write_text(out, text + "\n")
        stderr.print(f"wrote {out}")
