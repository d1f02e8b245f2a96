"""Progress on stderr: a live rich bar on a terminal, a line per tenth of the work in a log or a pipe."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from specpolicy.cli.common import stderr
from specpolicy.defaults import PROGRESS_LOG_STEPS


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """Yield ``update(done, total)``: a bar on a terminal, else logged as ``description: done/total``."""
    if not stderr.is_terminal:
        yield _logger(description, total)
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=stderr, transient=False) as progress:
        task = progress.add_task(description, total=total)

        def update(done: int, new_total: int | None = None) -> None:
            progress.update(task, completed=done, total=new_total if new_total is not None else total)

        yield update


def _logger(description: str, total: int | None) -> Callable[..., None]:
    """An ``update`` that prints a line each time the work passes another tenth of ``total``."""
    start, logged = time.monotonic(), 0

    def update(done: int, new_total: int | None = None) -> None:
        nonlocal total, logged
        total = new_total if new_total is not None else total
        step = int(PROGRESS_LOG_STEPS * done / total) if total else 0
        if step > logged:
            logged = step
            stderr.print(f"{description}: {done}/{total} ({time.monotonic() - start:.0f} s)", highlight=False,
                         soft_wrap=True)

    return update
