"""``specpolicy tune RULE``: a controller's parameters searched by exact replay, held out, in its terms."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specpolicy.cli.common import FormatOption, OutputFormat, SeedOption, check_out_file, emit, stderr
from specpolicy.cli.sweep import parse_candidates


def tune(
    rule: str = typer.Argument(..., help="a field controller (dflash-mlx, sglang-adaptive, "
                                         "mistralrs-autotune, ...) or llama.cpp's flags (llamacpp-pmin)"),
    sweep: Path = typer.Option(..., help="a replay sweep recording every block size the rule may pick"),
    grid: list[str] = typer.Option(..., help="a parameter's values to try, NAME=V1,V2,... (repeat it)"),
    draws: int = typer.Option(None, min=1, help="try this many settings of the grid, drawn with --seed "
                                                "(default: every setting)"),
    seed: int = SeedOption,
    costs: str = typer.Option(None, help="price replay with this cost table (default: the sweep's own)"),
    candidates: str = typer.Option(None, help="the fixed blocks to hold it against (default: the sweep's)"),
    out: Path = typer.Option(None, help="save the tuned setting, its engine terms and the held-out rows as "
                                        "JSON"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Search a field controller's parameters on the training side of a sweep, hold the best out against
    its defaults and the best fixed block (paired 95% CIs), and write it as the engine takes it."""
    from specpolicy.costs import CostTable
    from specpolicy.evaluation.tune import parse_grid, settings
    from specpolicy.evaluation.tune import tune as run_tune
    from specpolicy.sweep.store import SweepStore

    check_out_file(out, "tuned.json")
    SweepStore.load(sweep)  # the store and the table, read before any replay
    if costs is not None:
        CostTable.load(costs)
    names = settings(rule, parse_grid(grid), draws, seed)
    stderr.print(f"replaying {len(names)} settings of {rule} on the training side of {sweep} ...")
    tuned = run_tune(sweep, rule, names, costs=[costs] if costs else (),
                     fixed=parse_candidates(candidates) if candidates else None)
    emit([r.table_row() if fmt is OutputFormat.table else r.to_dict() for r in tuned.held_out], fmt,
         title=f"specpolicy tune {rule}: held out (validation side), vs its defaults, modelled")
    stderr.print(f"best of {tuned.tried} on the training side: {tuned.setting} ({tuned.train_speedup:.3f}x "
                 f"plain; its defaults {tuned.train_defaults:.3f}x)\nin {rule}'s own terms:\n{tuned.terms}")
    if out is not None:
        out.write_text(json.dumps({"rule": rule, "setting": tuned.setting, "tried": tuned.tried,
                                   "engine_terms": tuned.terms,
                                   "held_out": [r.to_dict() for r in tuned.held_out]}, indent=2) + "\n")
