"""``specpolicy compare --policies fixed16,blockpilot,oracle``: the main job.

Speed is the headline: pooled speedup over plain AR decoding, the speed of each policy relative to a
baseline (fixed16) with a paired 95% bootstrap interval, tokens/s, the per-prompt distribution (p10,
median), tau as a diagnostic and the share of the time oracle's gain each policy captures. Replay
prices the sweep's exact cycles with the machine's cost table (modelled time); live decodes every
prompt with plain AR and each policy, in an order that rotates per prompt (measured time).
"""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.cli.common import (
    AllowNoisyOption,
    DeviceOption,
    DrafterOption,
    DtypeOption,
    FormatOption,
    MaxNewTokensOption,
    OutputFormat,
    SeedOption,
    ServerOption,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    emit,
    fail,
    policy_names,
    settings_from,
    stderr,
)
from specpolicy.cli.compare_runs import (
    DEFAULT_DATASET,
    DEFAULT_SAMPLES,
    CompareOptions,
    Mode,
    prompt_labels,
    results_per_dataset,
)
from specpolicy.cli.sweep import parse_candidates
from specpolicy.defaults import COMPARE_BASELINE, COMPARE_ORACLE


def compare(
    policies: str = typer.Option("fixed16,blockpilot,oracle", help="comma-separated policy names"),
    dataset: str = typer.Option(DEFAULT_DATASET, help="prompt sets (comma-separated) or .jsonl/.txt files"),
    mode: Mode = typer.Option(Mode.replay, help="replay (exact, modelled time) or live (decode, measured time)"),
    sweep: Path = typer.Option(None, help="evaluate this existing sweep store instead of sweeping"),
    temperature: float = TemperatureOption,
    candidates: str = typer.Option(None, help="block sizes (default: the sweep's, or 1,2,4,8,12,16,20,24,32); "
                                              "with --sweep, any subset of the sweep's"),
    max_samples: int = typer.Option(DEFAULT_SAMPLES, min=1, help="prompts per dataset (seeded shuffle)"),
    max_new_tokens: int = MaxNewTokensOption,
    seed: int = SeedOption,
    baseline: str = typer.Option(COMPARE_BASELINE, help="policy the speed ratios and gain share are measured against"),
    oracle: str = typer.Option(COMPARE_ORACLE, help="policy whose gain over the baseline the gain share divides by "
                                              "(e.g. oracle-step, oracle-verify)"),
    concurrency: str = typer.Option("1", help="simulate serving this many requests at once (with --sweep and "
                                              "--batch-costs); a list such as 1,4,16,64 maps speed over them (--plot: "
                                              "a heat map); 1: one prompt at a time"),
    batch_costs: Path = typer.Option(None, help="batch cost table for --concurrency (`specpolicy bench "
                                                "batch-latency --out FILE`)"),
    allow_noisy: bool = AllowNoisyOption,
    costs: str = typer.Option(None, help="price replay with this cost table (from `specpolicy bench latency`); "
                                         "several (a.json,b.json) measured at different --context price each prompt "
                                         "with the one nearest its length"),
    by: str = typer.Option(None, help="a row per prompt category, group or context-length bucket (and one over "
                                      "all): category, group, context"),
    split: str = typer.Option(None, help="evaluate one side of the --sweep store: train or validation (by "
                                         "conversation and input, as `specpolicy train` holds out)"),
    threads: int = ThreadsOption,
    engine: str = typer.Option(None, help="run the policies in a serving engine and measure them there: llamacpp "
                                          "(llama.cpp's llama-server, `specpolicy engine build`), beside replay"),
    server: str = ServerOption,
    fmt: OutputFormat = FormatOption,
    plot: Path = typer.Option(None, help="save a PNG: speed per policy and chosen block sizes"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Compare block-size policies: pooled speedup over AR, speed vs a baseline with paired CIs, tau, gain share."""
    from specpolicy.evaluation.metrics import split_by, summarize

    names = policy_names(policies)
    if not names:
        raise fail("no policies given; e.g. --policies fixed16,blockpilot,oracle")
    options = settings_from(CompareOptions, locals(), policies=names,
                            datasets=[d.strip() for d in dataset.split(",") if d.strip()],
                            candidates=parse_candidates(candidates) if candidates else None,
                            concurrency=tuple(parse_candidates(concurrency, "--concurrency", block_sizes=False)),
                            costs=tuple(Path(p.strip()) for p in costs.split(",") if p.strip()) if costs else ())
    options.validate()
    names = [sweep.name] if sweep is not None else options.datasets
    labels = {name: prompt_labels(options, name) for name in names} if by else {}
    unlabelled = [name for name, found in labels.items() if not any(found.values())]
    if unlabelled:  # before any work: the rows would all read '-'
        raise fail(f"--by {by}: no prompt of {', '.join(map(str, unlabelled))} carries a {by} label (Spec-Bench and "
                   f"labelled .jsonl files do); drop --by")
    runs = list(results_per_dataset(options))
    if sweep is not None:
        from specpolicy.sweep.store import SweepStore

        temperature = float(SweepStore.load(sweep).meta.get("temperature") or 0.0)
    parts = [(name, conc, label, part) for name, conc, results in runs
             for label, part in (split_by(results, labels[name]) if by else [(None, results)])]
    rows = [(name, conc, label, row) for name, conc, label, part in parts
            for row in summarize(part, baseline, oracle)]
    timing = runs[0][2][0].timing if runs and runs[0][2] else "none"
    many, mapped = len({name for name, _, _ in runs}) > 1, len(options.concurrency) > 1
    if mapped:
        timing = timing.rpartition(", concurrency")[0]
    served = f", concurrency {','.join(map(str, options.concurrency))}" if mapped else ""
    where = "llama.cpp" if engine else mode.value
    emit(_output_table(rows, fmt, by, many, mapped), fmt,
         title=f"specpolicy compare: {where}, {timing} time{served}, T={temperature:g}, {threads} thread(s)"
               f", {len(runs[0][2][0].prompts) if runs and runs[0][2] else 0} prompts")
    if fmt is OutputFormat.table:
        stderr.print(_legend(timing, baseline, oracle, mapped, bool(by or many)))
    if plot is not None and mapped:
        from specpolicy.evaluation.report import plot_speedup_map

        cells = {(row.policy, label or "all", conc): row.speedup for _, conc, label, row in rows}
        plot_speedup_map(cells, plot, title=f"{Path(str(sweep)).name}: pooled speedup over plain AR ({timing})")
        stderr.print(f"plot saved to {plot}")
    elif plot is not None:
        runs = [(name, results) for name, _, results in runs]
        labelled = {name: [(label, part) for n, _, label, part in parts if n == name] for name, _ in runs}
        _plot(runs, plot, f"{mode.value}, T={temperature:g}", (by, labelled) if by else None)


def _output_table(rows, fmt: OutputFormat, by: str | None, many: bool, mapped: bool) -> list[dict]:
    """The rows as ``emit`` writes them: the concurrency grid, a table that fits 100 columns (a label or dataset
    column leaves no room for tok/s and median), or every field (json, csv, markdown)."""
    if fmt is OutputFormat.table and mapped:
        return _speedup_grid(rows, by)
    if fmt is OutputFormat.table:
        hidden = ("tok/s", "median") if by or many else ()
        return [({"dataset": name} if many else {}) | ({by: label} if by else {})
                | {k: v for k, v in row.table_row().items() if k not in hidden} for name, conc, label, row in rows]
    return [{"dataset": name, **({"concurrency": conc} if conc else {}), **({by: label} if by else {}),
             **row.to_dict()} for name, conc, label, row in rows]


def _legend(timing: str, baseline: str, oracle: str, mapped: bool, narrow: bool) -> str:
    """What the table's columns mean (stderr, under the table)."""
    if mapped:
        return ("cells: pooled speedup over plain AR at each concurrency (modelled); '<' marks a cell slower than AR; "
                "every figure and interval: --format csv")
    spread = "p10: per-prompt speedups' 10th percentile (tok/s, median: --format csv)" if narrow else \
        "p10/median: per-prompt speedups"
    return (f"speedup: pooled over plain AR ({timing}); vs {baseline}: pooled speed ratio, paired 95% CI; "
            f"{spread}; gain: share of {oracle}'s gain over the baseline")


def _speedup_grid(rows, by: str | None) -> list[dict[str, str]]:
    """The map as one compact table: a row per policy (and --by label), a column per concurrency."""
    grid: dict[tuple[str, str | None], dict[str, str]] = {}
    for _, conc, label, row in rows:
        cells = grid.setdefault((row.policy, label), {"policy": row.policy} | ({by: label} if by else {}))
        cells[f"c={conc}"] = f"{'<' if row.speedup < 1 else ''}{row.speedup:.2f}x"
    return list(grid.values())


def _plot(runs, plot: Path, title: str, labelled: tuple[str, dict] | None = None) -> None:
    """One PNG per dataset: speed and chosen sizes per policy, or (``--by``) speed per label and policy."""
    from specpolicy.evaluation.report import plot_by_label, plot_comparison

    for name, results in runs:
        path = plot if len(runs) == 1 else plot.with_name(f"{plot.stem}-{Path(name).stem}{plot.suffix}")
        if labelled is None:
            plot_comparison(results, path, title=f"{Path(name).name}: {title}")
        else:
            by, parts = labelled
            plot_by_label(parts[name], path, by, title=f"{Path(name).name}: {title}")
        stderr.print(f"plot saved to {path}")
