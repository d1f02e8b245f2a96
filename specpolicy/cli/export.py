"""``specpolicy export POLICY --sweep DIR --batch-costs FILE``: engine configurations, priced as run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from specpolicy.arguments import check_engine
from specpolicy.cli.common import BatchCostsOption, ServerOption, check_out_file, fail, stderr, warn_line
from specpolicy.files import write_text


def export(
    policy: str = typer.Argument(..., help="a policy name, e.g. adaptive-verify or blockpilot-guard"),
    sweep: Path = typer.Option(None, help="a replay sweep store the policy is simulated on (vLLM and "
                                          "SGLang)"),
    batch_costs: Path = BatchCostsOption,
    engine: str = typer.Option(None, help="llamacpp: llama-server command lines instead (one patched "
                                          "server and each setting's request fields, or a stock server "
                                          "per setting, and the routing rule)"),
    server: str = ServerOption,
    batch_sizes: str = typer.Option(None, help="concurrencies to export a size for (default 1-8), e.g. 1-4"),
    drafter: str = typer.Option(None, help="the drafter's path or hub id on the serving machine, written "
                                           "into the configs (default: a marked placeholder naming the "
                                           "sweep's drafter)"),
    out: Path = typer.Option(None, help="write the JSON here instead of stdout"),
    fastest: bool = typer.Option(False, help="also search the fastest static configuration of each engine "
                                             "for the sweep, whatever the policy, and print it beside the "
                                             "policy's"),
) -> None:
    """Simulate POLICY serving at each concurrency, then export the vLLM and SGLang configurations that run it
    as closely as each engine can, each priced by simulating exactly what is exported."""
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.evaluation.compare_options import serving_inputs_missing
    from specpolicy.evaluation.export import export_for_engines
    from specpolicy.registry import get_registry
    from specpolicy.replay.batch_costs import BatchCostTable
    from specpolicy.sweep.store import SweepStore

    check_out_file(out, "export.json")
    check_engine(engine, "exports to", server)
    ignored = [o for o, given in (("--sweep", sweep), ("--batch-costs", batch_costs), ("--drafter", drafter),
                                  ("--batch-sizes", batch_sizes), ("--fastest", fastest)) if given]
    if engine is not None and ignored:
        raise fail(f"--engine llamacpp writes llama-server command lines; {', '.join(ignored)} would be "
                   "ignored: drop them, or drop --engine for the vLLM and SGLang export")
    if engine is not None:
        return _write(_llamacpp(policy, engine, server), out)
    missing = serving_inputs_missing(sweep, batch_costs)
    if missing:
        raise fail(f"the vLLM and SGLang export simulates the policy serving: pass {missing}; or pass "
                   "--engine llamacpp for llama-server command lines")
    batches = parse_candidates(batch_sizes or "1-8", "--batch-sizes", block_sizes=False)
    costs = BatchCostTable.load(batch_costs)
    costs.check_batches(batches, "--batch-sizes")
    store = SweepStore.load(sweep)
    chosen = get_registry().create(policy, store.candidates)
    for line in costs.flag_warnings(batch_costs):
        warn_line(line)
    swept = str(store.meta.get("models", {}).get("drafter") or store.meta.get("drafter", ""))
    named = drafter or f"<SET ME: the serving machine's path of {swept}>"
    document = export_for_engines(chosen, store, costs, batches, named, on_batch=stderr.print,
                                  fastest=fastest)
    if not drafter:  # after every refusal: a refusal stays one line
        stderr.print(f"note: the configs name the drafter as {named!r}; pass --drafter PATH for the serving "
                     "machine", highlight=False)
    if "note" in document:
        stderr.print(f"note: {document['note']}", highlight=False)
    _write(document, out)


def _llamacpp(policy: str, engine: str, server: str | None) -> dict:
    """llama-server command lines that deploy ``policy`` with the shipped pair's GGUF files."""
    from specpolicy.defaults import DEFAULT_CANDIDATES, DEFAULT_THREADS, TRAINING_BLOCK_SIZE
    from specpolicy.engines.build import find_server, gguf_pair
    from specpolicy.evaluation.engine import deployable_settings, engine_sizes, for_engine
    from specpolicy.evaluation.export import llamacpp_deployment
    from specpolicy.registry import get_registry

    sizes = engine_sizes(DEFAULT_CANDIDATES)
    settings = deployable_settings(for_engine(get_registry().create(policy, sizes), sizes),
                                   TRAINING_BLOCK_SIZE)
    binary, folder = find_server(server), gguf_pair("tiny", "tiny")
    return llamacpp_deployment(settings, binary, folder / "target.gguf", folder / "drafter.gguf",
                               DEFAULT_THREADS, policy)


def _write(document: dict, out: Path | None) -> None:
    text = json.dumps(document, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        write_text(out, text + "\n")
        stderr.print(f"wrote {out}")
