"""The ``specpolicy`` command line (Typer + rich), a module per command (compare's runs: ``compare_runs``)."""

from __future__ import annotations

import os
import warnings

import typer

from specpolicy.cli import (
    bench,
    compare,
    convert,
    engine,
    export,
    generate,
    policies,
    sweep,
    train,
    tune,
    zoo,
)
from specpolicy.cli.errors import DEBUG, guard_all

app = typer.Typer(
    name="specpolicy",
    help="Learn and compare block-size policies for DFlash speculative decoding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's source line breaks join; `code` is styled
)


@app.callback()
def options(debug: bool = typer.Option(False, "--debug", help="show the traceback of an error instead of "
                                                              "one line")
            ) -> None:
    """Learn and compare block-size policies for DFlash speculative decoding."""
    DEBUG["on"] = DEBUG["on"] or debug


app.add_typer(bench.app, name="bench")
app.add_typer(zoo.app, name="zoo")
app.add_typer(engine.app, name="engine")
app.command("compare")(compare.compare)
app.command("policies")(policies.policies)
app.command("sweep")(sweep.sweep)
app.command("import-blockpilot")(sweep.import_blockpilot)
app.command("import-traces")(sweep.import_traces)
app.command("train")(train.train)
app.command("generate")(generate.generate)
app.command("convert")(convert.convert)
app.command("export")(export.export)
app.command("tune")(tune.tune)


@app.command("version")
def version() -> None:
    """Print the installed version."""
    from specpolicy import __version__

    typer.echo(__version__)


guard_all(app)


def main() -> None:
    """Console-script entry point (quiet transformers and hub progress bars, without importing them)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.formatwarning = lambda message, category, *rest: (  # one line, as the CLI's own messages
        f"warning: {message}\n" if issubclass(category, UserWarning) else f"{category.__name__}: {message}\n")
    app()
