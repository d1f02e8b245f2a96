"""Every default lives in specpolicy/defaults.py: no numeric literal as a default anywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "specpolicy"
EXEMPT = ("defaults.py", "zoo/", "models/testing.py", "plugins/field_controllers.py",
          "plugins/field_dflash_mlx.py", "plugins/field_costed.py")
"""defaults.py itself; the zoo's training recipes (each one settings dataclass, read top to bottom, cleanrl
style); the tiny test models built in the tests; and the field's controllers, each one dataclass of an
engine's parameters at its shipped values, transcribed beside the source it cites (the engine's defaults,
not specpolicy's: each read in that one place)"""
NEUTRAL = (0, 1, -1)


def _literal(node: ast.AST | None) -> bool:
    """A numeric literal other than 0, 1 and -1 (``-2`` parses as a unary minus)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and node.value not in NEUTRAL)


def _stray_defaults(path: Path) -> list[str]:
    """Function parameter defaults, class-level field defaults and ``typer.Option(<literal>, ...)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        values: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            values = [*node.args.defaults, *node.args.kw_defaults]
        elif isinstance(node, ast.ClassDef):
            values = [item.value for item in node.body if isinstance(item, ast.AnnAssign)]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option" and node.args:
            values = [node.args[0]]
        found += [f"{path.relative_to(PACKAGE.parent)}:{v.lineno} ({ast.unparse(v)})"
                  for v in values if _literal(v)]
    return found


def test_no_default_is_a_stray_literal():
    stray = [hit for path in sorted(PACKAGE.rglob("*.py"))
             if not str(path.relative_to(PACKAGE)).startswith(EXEMPT) for hit in _stray_defaults(path)]
    assert stray == [], "name these in specpolicy/defaults.py and read them from there"


def test_the_stray_literal_check_sees_each_kind(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import typer\nfrom dataclasses import dataclass\n\n\ndef f(a=1, b=0.05, *, c=-2):\n    "
                     "pass\n\n\n"
                     "@dataclass\nclass S:\n    n: int = 64\n    ok: int = 0\n\n\nx = typer.Option(128, "
                     "min=1)\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert [hit.split(" ")[1] for hit in _stray_defaults(probe)] == ["(0.05)", "(-2)", "(64)", "(128)"]
    finally:
        PACKAGE = saved


def test_the_cache_folder_is_never_the_current_folder_or_a_file(tmp_path, monkeypatch):
    """Reproduced: SPECPOLICY_CACHE="" put compare's cache in the current folder (./sweeps/...), and a file
    there was refused as "--out ... lies under the file", a flag the user never passed, after the sweep
    began."""
    import pytest

    from specpolicy.defaults import cache_dir

    monkeypatch.setenv("SPECPOLICY_CACHE", "")
    assert cache_dir() == Path.home() / ".cache" / "specpolicy"
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "file"))
    with pytest.raises(ValueError, match=r"\$SPECPOLICY_CACHE .*file is a file; point it at a folder"):
        cache_dir()
