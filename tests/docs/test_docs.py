"""The documentation stays true: it builds strictly, the CLI reference is current, the commands agree."""

from __future__ import annotations

import html
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
    return [line.strip() for line in re.findall(r"```bash\n(.*?)```", text,
                                                flags=re.S) for line in line.splitlines()
            if line.strip().startswith("pip install")]


def test_readme_and_installation_page_give_the_same_two_commands():
    readme = setup_commands((ROOT / "README.md").read_text())
    installation = setup_commands((ROOT / "docs" / "installation.md").read_text())
    assert len(readme) == 2 and readme == installation
    assert readme[1].endswith("python -m pytest --full")


def test_ci_runs_the_readme_test_command():
    test_command = setup_commands((ROOT / "README.md").read_text())[1]
    assert test_command in (ROOT / ".ci" / "run").read_text()


def _sections(text: str) -> dict[str, str]:
    """The reference's section of each command (``specpolicy compare`` -> its text), whitespace folded."""
    parts = re.split(r"^#+ `(specpolicy[^`]*)`$", text, flags=re.M)
    return {name: " ".join(html.unescape(body).split()) for name, body in zip(parts[1::2], parts[2::2])}


def _commands(command, name: str = "specpolicy") -> dict[str, object]:
    subs = getattr(command, "commands", {})
    return {name: command} | {k: v for key, sub in subs.items() for k,
                              v in _commands(sub, f"{name} {key}").items()}


@pytest.mark.docs
def test_cli_reference_is_generated_from_the_app():
    """Every command, option and help text the app decides is in docs/reference/cli.md, whatever layout the
    installed Typer writes it in (a new Typer release may write it otherwise; the project's words may not
    differ)."""
    import typer

    from specpolicy.cli import app

    sections = _sections((ROOT / "docs" / "reference" / "cli.md").read_text())
    commands = _commands(typer.main.get_command(app))
    stale = sorted(set(commands) ^ set(sections))
    for name, command in commands.items():
        text = sections.get(name, "")
        first_line = (command.help or "").split("\n\n")[0]
        wanted = [" ".join(first_line.split())] + [
            f"{opt}" for p in command.params for opt in getattr(p, "opts", ()) if opt.startswith("--")] + [
            " ".join(p.help.split()) for p in command.params if getattr(p, "help", None)]
        stale += [f"{name}: {w[:60]}" for w in wanted if w not in text]
    assert not stale, ("docs/reference/cli.md is stale: regenerate it with "
                       f"`typer specpolicy.cli utils docs --name specpolicy --output docs/reference/cli.md`: "
                       f"{stale}")


@pytest.mark.docs
def test_mkdocs_build_is_strict_clean(tmp_path):
    if shutil.which("mkdocs") is None:
        pytest.fail("mkdocs is not installed; pip install -e '.[test]'")
    result = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.docs
def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout[-3000:]
