"""``specpolicy compare``, the main job: pooled speedup over plain AR, speed vs a baseline with paired 95%
intervals, tau and oracle-gain shares, by replay (modelled) or live decoding (measured)."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.cli.common import (
    BatchCostsOption,
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
from specpolicy.cli.compare_runs import prompt_labels, results_per_dataset
from specpolicy.cli.sweep import parse_candidates
from specpolicy.defaults import COMPARE_BASELINE, COMPARE_ORACLE, COMPARE_SAMPLES, DATASET
from specpolicy.evaluation.compare import ComparisonRow, Run, check_labels
from specpolicy.evaluation.compare_options import CompareOptions, Mode


def compare(
    policies: str = typer.Option("fixed16,blockpilot,oracle", help="comma-separated policy names"),
    dataset: str = typer.Option(DATASET, help="prompt sets (comma-separated) or .jsonl/.txt files"),
    mode: Mode = typer.Option(Mode.replay, help="replay (exact, modelled time) or live (decode, measured "
                                                "time)"),
    sweep: Path = typer.Option(None, help="evaluate this existing sweep store instead of sweeping"),
    temperature: float = TemperatureOption,
    candidates: str = typer.Option(None, help="block sizes (default: the sweep's, or "
                                              "1,2,4,8,12,16,20,24,32); with --sweep, any subset of the "
                                              "sweep's; learned policies choose among them"),
    max_samples: int = typer.Option(COMPARE_SAMPLES, min=1, help="prompts per dataset (seeded shuffle)"),
    max_new_tokens: int = MaxNewTokensOption,
    seed: int = SeedOption,
    baseline: str = typer.Option(COMPARE_BASELINE, help="policy the speed ratios and gain share are "
                                                        "measured against"),
    oracle: str = typer.Option(COMPARE_ORACLE, help="policy whose gain over the baseline the gain share "
                                                    "divides by (e.g. oracle-step, oracle-verify)"),
    concurrency: str = typer.Option("1", help="simulate serving this many requests at once (with --sweep "
                                              "and --batch-costs); a list such as 1,4,16,64 maps speed "
                                              "over them (--plot: a heat map); 1: one prompt at a time"),
    batch_costs: Path = BatchCostsOption,
    decode_only: bool = typer.Option(False, "--decode-only", help="with --batch-costs: price decode steps "
                                     "only (each request's prefill left out), as time per output token does"),
    costs: str = typer.Option(None, help="price replay with this cost table (from `specpolicy bench "
                                         "latency`); several (a.json,b.json) measured at different "
                                         "--context price each prompt with the one nearest its length"),
    by: str = typer.Option(None, help="a row per prompt category, group or context-length bucket (and one "
                                      "over all): category, group, context"),
    split: str = typer.Option(None, help="evaluate one side of the --sweep store: train or validation (by "
                                         "conversation and input, as `specpolicy train` holds out)"),
    threads: int = ThreadsOption,
    engine: str = typer.Option(None, help="run the policies in a serving engine and measure them there: "
                                          "llamacpp (llama.cpp's llama-server, `specpolicy engine "
                                          "build`), beside replay"),
    server: str = ServerOption,
    steps: Path = typer.Option(None, help="with --engine: save each policy's replies here, per-step "
                                          "records a fixed setting's run imports with `specpolicy "
                                          "import-traces`"),
    fmt: OutputFormat = FormatOption,
    plot: Path = typer.Option(None, help="save a PNG: speed per policy and chosen block sizes"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Compare block-size policies: pooled speedup over AR, speed vs a baseline (paired CIs), tau, gain."""
    from specpolicy.evaluation.compare import comparison_rows

    names = policy_names(policies)
    if not names:
        raise fail("no policies given; e.g. --policies fixed16,blockpilot,oracle")
    options = settings_from(CompareOptions, locals(), policies=names, costs=_cost_tables(costs),
                            datasets=[d.strip() for d in dataset.split(",") if d.strip()],
                            candidates=parse_candidates(candidates) if candidates else None,
                            concurrency=tuple(
                                parse_candidates(concurrency, "--concurrency", block_sizes=False)))
    options.validate()
    labels = _labels(options)
    runs = list(results_per_dataset(options))
    _notes(options)
    _report(options, runs, comparison_rows(runs, labels, options), labels, fmt)


def _cost_tables(costs: str | None) -> tuple[Path, ...]:
    """``--costs``: the tables it names, comma-separated (paths or shipped names), each checked."""
    tables = tuple(Path(p.strip()) for p in (costs or "").split(",") if p.strip())
    if costs is not None and not tables:
        raise fail(f"--costs names no table ({costs!r}); pass a table's path or a shipped table's name, such "
                   "as cast-h100-sxm-llama-3.1-8b-context-1024, or leave --costs out")
    return tables


def _notes(options: CompareOptions) -> None:
    """A note when the baseline or the oracle is not compared (after the runs: a refusal stays one line)."""
    if options.baseline not in options.policies:
        stderr.print(f"note: baseline {options.baseline} is not among the policies; no ratios or gain shares")
    elif options.oracle not in options.policies:
        stderr.print(f"note: {options.oracle} is not among the policies; no gain shares")


def _labels(options: CompareOptions) -> dict[str, dict[str, str]]:
    """Dataset -> prompt id -> its ``--by`` label, refused before any work when no prompt carries one."""
    if not options.by:
        return {}
    sources = [options.sweep.name] if options.sweep is not None else options.datasets
    return check_labels({name: prompt_labels(options, name) for name in sources}, options.by)


def _decoded_at(options: CompareOptions) -> str:
    """The temperature and threads the compared decodes ran at, as far as known: a stored sweep's own
    temperature (an import records none) and no threads, as replay runs none; the engine's threads."""
    if options.sweep is None:
        return f", T={options.temperature:g}, {options.threads} thread(s)"
    from specpolicy.sweep.store import SweepStore

    temperature = SweepStore.load(options.sweep).meta.get("temperature")
    threads = f", {options.threads} thread(s)" if options.engine else ""
    return (f", T={temperature:g}" if temperature is not None else "") + threads


def _report(options: CompareOptions, runs: list[Run], rows: list[ComparisonRow], labels: dict,
            fmt: OutputFormat ) -> None:
    """The table (stdout), its legend (stderr) and the plot."""
    timing = runs[0].results[0].timing if runs and runs[0].results else "none"
    many, mapped = len({run.dataset for run in runs}) > 1, len(options.concurrency) > 1
    if mapped:
        timing = timing.rpartition(", concurrency")[0]
    if timing.startswith("modelled") and "(" not in timing and not mapped:  # which cost table priced it
        own = "this machine's table" if options.sweep is None else "the sweep's own table"  # without --costs
        tables = [options.batch_costs] if options.batch_costs else options.costs
        timing += f" ({', '.join(p.stem for p in tables) or own})"
    served = f", concurrency {','.join(map(str, options.concurrency))}" if mapped else ""
    where = "llama.cpp" if options.engine else options.mode.value
    prompts = len(runs[0].results[0].prompts) if runs and runs[0].results else 0
    decoded = _decoded_at(options)  # read once: a stored sweep's meta.json
    emit(_output_table(rows, fmt, options.by, many, mapped), fmt,
         title=f"specpolicy compare: {where}, "
               f"{'taus only' if timing == 'none' else timing + ' time'}{served}{decoded}, {prompts} prompts")
    if fmt is OutputFormat.table:
        stderr.print(_legend(timing, options.baseline, options.oracle, mapped, bool(options.by or many)))
    if options.plot is not None and mapped:
        from specpolicy.evaluation.report import plot_speedup_map

        cells = {(r.row.policy, r.label or "all", r.concurrency): r.row.speedup for r in rows}
        plot_speedup_map(cells, options.plot,
                         title=f"{Path(str(options.sweep)).name}: pooled speedup over plain AR ({timing})")
        stderr.print(f"plot saved to {options.plot}")
    elif options.plot is not None:
        _plot(runs, options.plot, f"{options.mode.value}{decoded}",
              (options.by, labels) if options.by else None)


def _output_table(rows: list[ComparisonRow], fmt: OutputFormat, by: str | None, many: bool, mapped: bool
                  ) -> list[dict]:
    """The rows as ``emit`` writes them: the concurrency grid, a table that fits 100 columns (a label or
    dataset column leaves no room for tok/s and median), or every field (json, csv, markdown)."""
    if fmt is OutputFormat.table and mapped:
        return _speedup_grid(rows, by)
    if fmt is OutputFormat.table:
        hidden = ("tok/s", "median") if by or many else ()
        return [({"dataset": r.dataset} if many else {}) | ({by: r.label} if by else {})
                | {k: v for k, v in r.row.table_row().items() if k not in hidden} for r in rows]
    return [r.to_dict(by) for r in rows]


def _legend(timing: str, baseline: str, oracle: str, mapped: bool, narrow: bool) -> str:
    """What the table's columns mean (stderr, under the table)."""
    if timing == "none":
        return ("the sweep records tau only (an imported store: no replay tables, no times), so no speed "
                "is shown; tau: mean tokens per cycle; chose the best tau: prompts where the policy's "
                "block size had the highest tau. Speed needs a cost table: pass --costs FILE (an imported "
                "trace: a measured GPU table from specpolicy/zoo/measured/, docs: on real models' data)")
    if mapped:
        return (f"cells: pooled speedup over plain AR at each concurrency ({timing}; --decode-only leaves "
                "prefills out); '<' marks a cell slower than AR; every figure and interval: --format csv")
    spread = "p10: per-prompt speedups' 10th percentile (tok/s, median: --format csv)" if narrow else \
        "p10/median: per-prompt speedups"
    return (f"speedup: pooled over plain AR, {timing}; vs {baseline}: pooled speed ratio, paired 95% CI; "
            f"{spread}; gain: share of {oracle}'s gain over the baseline")


def _speedup_grid(rows: list[ComparisonRow], by: str | None) -> list[dict[str, str]]:
    """The map as one compact table: a row per policy (and --by label), a column per concurrency."""
    grid: dict[tuple[str, str | None], dict[str, str]] = {}
    for r in rows:
        cells = grid.setdefault((r.row.policy, r.label),
                                {"policy": r.row.policy} | ({by: r.label} if by else {}))
        cells[f"c={r.concurrency}"] = f"{'<' if r.row.speedup < 1 else ''}{r.row.speedup:.2f}x"
    return list(grid.values())


def _plot(runs: list[Run], plot: Path, title: str, labelled: tuple[str, dict] | None = None) -> None:
    """One PNG per dataset: speed and chosen sizes per policy, or (``--by``) speed per label and policy."""
    from specpolicy.evaluation.metrics import split_by
    from specpolicy.evaluation.report import plot_by_label, plot_comparison

    for name, _, results in runs:
        path = plot if len(runs) == 1 else plot.with_name(f"{plot.stem}-{Path(name).stem}{plot.suffix}")
        if labelled is None:
            plot_comparison(results, path, title=f"{Path(name).name}: {title}")
        else:
            by, labels = labelled
            plot_by_label(split_by(results, labels[name]), path, by, title=f"{Path(name).name}: {title}")
        stderr.print(f"plot saved to {path}")
