"""``specpolicy zoo info``: what the built-in tiny pair ships (rebuilding it: ``python -m zoo_build``)."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.cli.common import fail, stderr
from specpolicy.defaults import TWIN_HEADS, TWIN_INTERMEDIATE, TWIN_LAYERS

app = typer.Typer(help="The built-in tiny target and DFlash drafter; its cost twin.", no_args_is_help=True)


@app.command("info")
def info() -> None:
    """Where the shipped zoo lives and what it contains."""
    from specpolicy.zoo import ZOO_DIR

    typer.echo(f"the tiny zoo: {ZOO_DIR}")
    for entry in sorted(ZOO_DIR.iterdir()):
        files = [p for p in entry.rglob("*") if p.is_file()] if entry.is_dir() else [entry]
        size = sum(p.stat().st_size for p in files) / 1e6
        typer.echo(f"{entry.name}/\t{len(files)} files\t{size:.2f} MB" if entry.is_dir() else
                   f"{entry.name}\t{size:.2f} MB")


@app.command("twin")
def twin(layers: int = typer.Option(TWIN_LAYERS, min=1, help="target layers (the tiny target's 6 first)"),
         heads: int = typer.Option(TWIN_HEADS, min=1, help="attention heads (the tiny target's 4 first)"),
         intermediate: int = typer.Option(TWIN_INTERMEDIATE, min=1, help="MLP units per layer (768 first)"),
         out: Path = typer.Option(None, help="folder for target/ and drafter/ (default: the cache, where "
                                             "--target twin --drafter twin find it)")) -> None:
    """Build the cost twin: the tiny pair's function (the same drafts, acceptance and outputs) in a target
    many times larger, so cycles cost what a real pair's cost (docs/cost-twin.md)."""
    import time

    from specpolicy.models.sources import twin_dir
    from specpolicy.models.twin import TwinShape, build_twin
    from specpolicy.zoo import DRAFTER_DIR, TARGET_DIR

    start, shape = time.perf_counter(), TwinShape(layers, heads, intermediate)
    try:  # the shape and the folder are refused before the weights grow
        folder = build_twin(TARGET_DIR, DRAFTER_DIR, out or twin_dir(), shape)
    except ValueError as error:
        raise fail(str(error)) from None
    stderr.print(f"the cost twin ({layers} layers, {heads} heads, {intermediate} MLP units) in {folder} "
                 f"({time.perf_counter() - start:.0f} s); use it with "
                 + ("--target twin --drafter twin" if out is None else f"--target {folder}/target --drafter "
                    f"{folder}/drafter"),
                 highlight=False)
