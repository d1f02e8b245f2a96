"""``specpolicy zoo info``: what the built-in tiny model pair ships (rebuilding it: ``python -m zoo_build``)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The built-in tiny target and DFlash drafter.", no_args_is_help=True)


@app.command("info")
def info() -> None:
    """Where the shipped zoo lives and what it contains."""
    from specpolicy.zoo import ZOO_DIR

    for path in sorted(ZOO_DIR.rglob("*")):
        if path.is_file():
            typer.echo(f"{path.relative_to(ZOO_DIR)}\t{path.stat().st_size / 1e6:.2f} MB")
