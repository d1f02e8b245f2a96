"""``specpolicy policies``: every registered policy family and the distribution that provides it."""

from __future__ import annotations

from specpolicy.cli.common import FormatOption, OutputFormat, emit, stderr


def policies(fmt: OutputFormat = FormatOption) -> None:
    """List policy families: name, aliases, description (--format json|csv|markdown adds the rest)."""
    from specpolicy.registry import get_registry

    registry = get_registry()
    rows = [{"name": f.name, "aliases": ",".join(f.aliases), "description": f.description,
             "learned": f.learned, "plugin": f.plugin, "distribution": f.distribution}
            for f in registry.unique()]
    emit(rows, fmt, title=f"specpolicy policies ({len(rows)} families)", table_columns=3)
    for name, error in registry.failures.items():
        stderr.print(f"[yellow]plugin {name!r} failed to load and was skipped:[/] {error}")
