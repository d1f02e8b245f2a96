"""The one way specpolicy writes: to a temporary sibling renamed into place once complete, so a kill or a full
disk leaves the old version or the new, never half; a failed write raises an ``OSError`` naming the path. And
where a path names a shipped file (:func:`shipped`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"
"""what a file or folder being written is called until it is complete: its name plus this"""


def check_folder_path(path: str | Path, what: str, fix: str = "pass a folder") -> Path:
    """``path`` where a folder is or can be made; else a ValueError naming ``what`` and ``fix``."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} is a file; {fix}")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise ValueError(f"{what} lies under the file {blocking}; {fix}")
    return path


def check_replaceable(path: str | Path, marker: str) -> Path:
    """``path`` when an output folder may be written there: new, empty, or an earlier output of the same kind
    (holding ``marker``, replaced whole); otherwise a ValueError, raised before any work starts."""
    path = check_folder_path(path, str(path), "pass a new folder")
    if path.exists() and (not path.is_dir() or (any(path.iterdir()) and not (path / marker).exists())):
        raise ValueError(f"{path} exists and is not an earlier output of this command (it has no {marker}); "
                         "pass a new folder: an earlier output is replaced whole, other files are never "
                         "mixed or removed")
    return path


@contextlib.contextmanager
def atomic_path(path: str | Path, folder: str | None = None) -> Iterator[Path]:
    """Yield the temporary sibling to write ``path`` to, renamed over it when the block ends, removed when it
    raises; ``folder``: a folder marked as this command's output by that file (:func:`check_replaceable`)."""
    path = check_replaceable(path, folder) if folder else Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    _remove(tmp)  # a kill's leftover from an earlier try
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # an output's folders, as every writer made them
        if folder:
            tmp.mkdir()
        yield tmp
        _rename(tmp, path)
    except Exception as error:
        _remove(tmp)
        converted = _os_error(error, path, tmp)
        if converted is error:
            raise
        raise converted from error
    except BaseException:  # Ctrl-C, a kill: nothing half-written stays
        _remove(tmp)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _rename(tmp: Path, path: Path) -> None:
    """``tmp`` over ``path``: a rename for a file; a folder's old version is moved aside, then removed."""
    if not (tmp.is_dir() and path.is_dir()):
        os.replace(tmp, path)
        return
    old = path.with_name(path.name + ".old")
    _remove(old)
    path.rename(old)
    tmp.rename(path)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _os_error(error: Exception, path: Path, tmp: Path) -> Exception:
    """``error`` as an ``OSError`` naming ``path`` (never the temporary ``tmp``) when the system refused the
    write (a full disk, a file-size limit), however reported; other errors as they are."""
    if isinstance(error, OSError):
        named = str(error.filename or "")
        if named and not named.startswith(str(tmp)):
            return error
        return OSError(error.errno, error.strerror or str(error), str(path) + named[len(str(tmp)):])
    # Rust's io::Error (safetensors), Python's
    code = re.search(r"(?:\bos error |\bcode: |\[Errno )(\d+)", str(error))
    return OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) if code else error


def shipped(path: str | Path, folder: Path, suffix: str = "",
            found: Callable[[Path], bool] = Path.exists) -> Path:
    """``path`` where it exists; else the shipped file the docs name, from any folder: a path under
    ``specpolicy/`` (as from a checkout) in the installed package, or a bare name (``NAME`` or
    ``NAME{suffix}``) in ``folder``, where ``found`` says it is one; else ``path`` (its reader names it)."""
    given = Path(path)
    if given.exists() or given.is_absolute():
        return given
    places = [Path(__file__).parents[1] / given] if given.parts[0] == "specpolicy" else []
    places += [folder / name for name in (given.name, given.name + suffix)] if len(given.parts) == 1 else []
    return next((f for f in places if found(f)), given)
