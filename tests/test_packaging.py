"""The wheel carries every package: setuptools finds ``specpolicy*`` packages, so every folder of code needs
an ``__init__.py``."""

from __future__ import annotations

from pathlib import Path

import tomllib
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_folder_of_code_is_a_package_the_wheel_finds():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(ROOT, include=config["packages"]["find"]["include"]))
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "specpolicy").rglob("*.py")}
    assert folders - found == set(), f"add an __init__.py to {sorted(folders - found)}"
    assert "specpolicy.plugins" in found and "specpolicy.envs" in found
