"""``specpolicy zoo info``: what the built-in tiny model pair ships (rebuilding it: ``python -m
zoo_build``)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The built-in tiny target and DFlash drafter.", no_args_is_help=True)


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
