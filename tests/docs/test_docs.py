"""The documentation stays true: it builds strictly, the CLI reference is current, the commands agree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def setup_commands(text: str) -> list[str]:
    """The fenced bash commands that start with `pip install`."""
    return [line.strip() for line in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in line.splitlines()
            if line.strip().startswith("pip install")]


def test_readme_and_installation_page_give_the_same_two_commands():
    readme = setup_commands((ROOT / "README.md").read_text())
    installation = setup_commands((ROOT / "docs" / "installation.md").read_text())
    assert len(readme) == 2 and readme == installation
    assert readme[1].endswith("python -m pytest --full")


def test_ci_runs_the_readme_test_command():
    test_command = setup_commands((ROOT / "README.md").read_text())[1]
    assert test_command in (ROOT / ".ci" / "run").read_text()


@pytest.mark.docs
def test_cli_reference_is_generated_from_the_app(tmp_path):
    out = tmp_path / "cli.md"
    subprocess.run([sys.executable, "-m", "typer", "specpolicy.cli", "utils", "docs", "--name", "specpolicy",
                    "--output", str(out)], check=True, capture_output=True)
    assert out.read_text() == (ROOT / "docs" / "reference" / "cli.md").read_text(), (
        "docs/reference/cli.md is stale: regenerate it with "
        "`typer specpolicy.cli utils docs --name specpolicy --output docs/reference/cli.md`")


@pytest.mark.docs
def test_mkdocs_build_is_strict_clean(tmp_path):
    if shutil.which("mkdocs") is None:
        pytest.fail("mkdocs is not installed; pip install -e '.[test]'")
    result = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.docs
def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
