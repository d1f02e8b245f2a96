"""One error discipline for the command line: every failure one line on stderr (``--debug`` or
``SPECPOLICY_DEBUG=1`` re-raises); library errors name the problem and the fix, anything else is a bug."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable

import typer
from rich.console import Console
from rich.markup import escape

stderr = Console(stderr=True)
DEBUG = {"on": os.environ.get("SPECPOLICY_DEBUG", "") not in ("", "0")}

USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
               RuntimeError, ImportError)


def explain(error: BaseException) -> str:
    """The one line a user sees for ``error``."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return (f"the disk is full ({error.filename or 'while writing'}); nothing half-written was kept: "
                "free space and rerun (a sweep resumes where it stopped)")
    if isinstance(error, PermissionError):
        return f"no permission to write or read {error.filename}; pick another path"
    if isinstance(error, (IsADirectoryError, NotADirectoryError)):
        return (f"{error.strerror}: {error.filename}; pass a file path where a file is expected, a folder "
                "otherwise")
    if isinstance(error, FileNotFoundError) and error.filename:  # the OS's; ours carry a message, no filename
        return f"no such file or folder: {error.filename}"
    if isinstance(error, USER_ERRORS):
        return str(error) or type(error).__name__
    if isinstance(error, OSError) and error.strerror:  # the system refused a read or write: the user's to fix
        return (f"{error.strerror}: {error.filename or 'while reading or writing'}; check the path, its "
                "space and limits")
    from specpolicy.registry import blame_plugin

    culprit = blame_plugin(error)
    if culprit is not None:
        return (f"policy {culprit.name!r} of plugin {culprit.plugin!r} "
                f"({culprit.distribution or 'not installed'}) raised {type(error).__name__}: {error} in its "
                "own code; report it to that plugin's authors (`specpolicy --debug ...` shows the "
                "traceback)")
    return (f"unexpected {type(error).__name__}: {error}. This is a bug in specpolicy; rerun with "
            "`specpolicy --debug ...` and report the traceback")


def guarded(command: Callable) -> Callable:
    """Wrap a command so any exception becomes one message and exit code 2 (130 on Ctrl-C)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # Typer's own usage errors print themselves
            raise
        except BrokenPipeError:  # the reader of our output left (`| head`): stop quietly, as Unix tools do
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(code=0) from None
        except KeyboardInterrupt:
            if DEBUG["on"]:
                raise
            stderr.print("[bold red]interrupted[/]: nothing finished is lost; rerun the same command to "
                         "resume")
            raise typer.Exit(code=130) from None
        except Exception as error:  # the one place every failure is turned into a message
            if DEBUG["on"]:
                raise
            stderr.print(f"[bold red]error:[/] {escape(explain(error))}", soft_wrap=True, highlight=False)
            raise typer.Exit(code=2) from None

    return run


def guard_all(app: typer.Typer) -> None:
    """Apply :func:`guarded` to every command of ``app`` and its sub-apps."""
    for info in app.registered_commands:
        info.callback = guarded(info.callback)
    for group in app.registered_groups:
        guard_all(group.typer_instance)
