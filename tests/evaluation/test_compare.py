"""Comparison as a library: ``specpolicy.evaluation.compare`` from Python, with no CLI and no torch, gives the rows
``specpolicy compare --sweep`` prints; its options are checked against their own defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from specpolicy.costs import uniform_costs
from specpolicy.evaluation.compare import CompareOptions, compare_sweep

POLICIES = ["fixed16", "fixed4", "adaptive", "oracle", "oracle-step"]


def test_the_library_gives_the_rows_the_command_prints(replay_store):
    from specpolicy.cli import app

    rows = compare_sweep(replay_store.path, POLICIES)
    printed = CliRunner().invoke(app, ["compare", "--sweep", str(replay_store.path), "--policies", ",".join(POLICIES),
                                       "--format", "json"])
    assert printed.exit_code == 0, printed.output
    assert [r.to_dict() for r in rows] == json.loads(printed.stdout)
    assert [r.row.policy for r in rows] == POLICIES and rows[0].row.vs_baseline == pytest.approx(1.0)


def test_it_imports_neither_the_cli_nor_torch(replay_store):
    code = ("import sys; from specpolicy.evaluation.compare import compare_sweep; "
            f"rows = compare_sweep({str(replay_store.path)!r}, ['fixed16', 'oracle'], by='context'); "
            "assert rows and rows[-1].label == 'all'; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('specpolicy.cli')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_two_tables_at_one_context_length_are_refused(replay_store, tmp_path):
    """Issue 48: with two --costs tables at one context length the first silently won (swapping them changed tok/s
    tenfold)."""
    slow, fast = (replace(uniform_costs(replay_store.candidates, s), context_length=512) for s in (0.1, 0.01))
    slow.save(tmp_path / "slow.json")
    fast.save(tmp_path / "fast.json")
    with pytest.raises(ValueError, match="2 tables measured at context 512.*pass one per context length"):
        compare_sweep(replay_store.path, ["fixed16"], costs=[tmp_path / "slow.json", tmp_path / "fast.json"])


def test_options_are_checked_against_their_own_defaults(tmp_path):
    stored = CompareOptions(["fixed16"], sweep=tmp_path, max_samples=12, dtype="bfloat16")
    with pytest.raises(ValueError, match="--max-samples, --dtype would be ignored"):
        stored.validate()
    assert not CompareOptions(["fixed16"]).given("datasets") and CompareOptions(["x"], datasets=["a"]).given("datasets")
    with pytest.raises(ValueError, match="--oracle oracle-step is not among --policies"):
        CompareOptions(["fixed16"], oracle="oracle-step").validate()
