"""MkDocs hook: give mkdocstrings a view of the package as installed.

``plugins/`` and ``envs/`` install as ``specpolicy.plugins`` and ``specpolicy.envs`` through
setuptools' package-dir mapping; griffe reads sources by folder, so this hook lays out
``build/api-view/specpolicy`` with links to the real folders before the build.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEW = ROOT / "build" / "api-view"


def build_view() -> None:
    """(Re)create the view; runs when MkDocs loads this hook, before the plugins read their config."""
    package = VIEW / "specpolicy"
    if VIEW.exists():
        shutil.rmtree(VIEW)
    package.mkdir(parents=True)
    for item in (ROOT / "specpolicy").iterdir():
        (package / item.name).symlink_to(item)
    (package / "plugins").symlink_to(ROOT / "plugins")
    (package / "envs").symlink_to(ROOT / "envs")


build_view()
