"""A rich progress bar on stderr."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from specpolicy.cli.common import stderr


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[callable]:
    """Yield ``update(done, total)``; the bar is drawn on stderr."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=stderr, transient=False) as progress:
        task = progress.add_task(description, total=total)

        def update(done: int, new_total: int | None = None) -> None:
            progress.update(task, completed=done, total=new_total if new_total is not None else total)

        yield update
