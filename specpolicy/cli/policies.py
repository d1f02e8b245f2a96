"""``specpolicy policies``: every registered policy family and the distribution that provides it."""

from __future__ import annotations

import typer

from specpolicy.cli.common import OutputFormat, emit, stderr


def policies(fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table, json, csv or markdown")
             ) -> None:
    """List policy families (name, kind, plugin, distribution, description)."""
    from specpolicy.registry import get_registry

    registry = get_registry()
    rows = [{"name": f.name, "aliases": ",".join(f.aliases), "kind": "per-cycle" if f.per_step else "per-prompt",
             "learned": f.learned, "plugin": f.plugin, "distribution": f.distribution, "description": f.description}
            for f in registry.unique()]
    emit(rows, fmt, title="specpolicy policies")
    for name, error in registry.failures.items():
        stderr.print(f"[yellow]plugin {name!r} failed to load and was skipped:[/] {error}")
