"""Progress reaches stderr when it is a file or a pipe (CI logs, ``2> log``), not only on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from specpolicy.cli import progress


def test_a_long_run_logs_progress_lines_when_stderr_is_not_a_terminal(monkeypatch):
    """Reported: a compare sweeping for minutes with stderr redirected wrote nothing until it ended."""
    buffer = io.StringIO()
    monkeypatch.setattr(progress, "stderr", Console(file=buffer, force_terminal=False, width=100))
    with progress.progress_bar("sweep sharegpt", 20) as update:
        for done in range(1, 11):
            update(done)
        logged = buffer.getvalue()
    assert "sweep sharegpt: 2/20" in logged and "sweep sharegpt: 10/20" in logged  # every tenth, as it goes
    assert logged.count("\n") <= 6  # a line per tenth at most, not one per item
    assert "sweep sharegpt: 20/20" not in buffer.getvalue()  # stopped halfway: no false completion


def test_a_terminal_gets_the_live_bar(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(progress, "stderr", Console(file=buffer, force_terminal=True, width=100))
    with progress.progress_bar("sweep sharegpt", 4) as update:
        update(4)
    assert "4/4" in buffer.getvalue() and "sweep sharegpt: 4/4" not in buffer.getvalue()
