"""dflash-mlx's cycle_events.jsonl: imported as a fixed block's recorded decodes priced by a table fitted from
their own timings, its cliffs named, every malformed sample refused in one line before anything is written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specpolicy.bench.from_run import fit_csv, fit_cycles
from specpolicy.cli import app
from specpolicy.costs import CostTable
from specpolicy.cycles import Plan
from specpolicy.defaults import MEASURED_DIR
from specpolicy.sweep.traces import TraceArgs, import_traces
from specpolicy.sweep.traces.dflash_mlx import read_cycles


def verify_us(tokens: int) -> float:
    """An M-series-like verify: 40 ms plus 1.5 ms a row, a kernel switch adding 30 ms from 12 rows."""
    return 40_000 + 1_500 * tokens + (30_000 if tokens >= 12 else 0)


def write_cycles(path: Path, requests: int = 6, block: int = 16, budget: int = 64, seed: int = 0,
                 blocks: tuple[int, ...] | None = None) -> list[dict]:
    """Cycle events as dflash-mlx's bench logger writes them (``CycleCompleteEvent.to_payload`` plus the
    request's id): ``requests`` decodes of ``budget`` tokens at ``block`` (or cycling through ``blocks``: an
    adaptive run), the last block capped by the budget."""
    rng, lines = random.Random(seed), []
    for request in range(requests):
        generated, cycle = 1, 0
        while generated < budget:
            size = min(blocks[cycle % len(blocks)] if blocks else block, budget - generated)
            accepted = min(size - 1, rng.choice([0, 1, 2, 3, 5, 8, 15]))
            cycle += 1
            lines.append({"request_id": request, "cycle": cycle, "block_len": size,
                          "commit_count": accepted + 1, "acceptance_len": accepted,
                          "verify_token_count": size,
                          "draft_us": 0.0 if size == 1 else 6_000.0 + 50 * size,
                          "verify_us": verify_us(size) * (1 + 0.02 * rng.random()), "acceptance_us": 10.0,
                          "cycle_total_us": 0.0, "ts": 1.0})
            generated += accepted + 1
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_a_fixed_blocks_run_imports_and_its_priced_replay_adds_up_to_its_recorded_time(tmp_path):
    """Within 5%: dflash-mlx caps its last blocks at the tokens left, where replay verifies whole blocks."""
    events = write_cycles(tmp_path / "cycle_events.jsonl", budget=512)
    result = import_traces(tmp_path / "cycle_events.jsonl", tmp_path / "store")
    assert result.requests == 6 and "B = 16" in result.exact_for
    costs = result.store.latency()
    assert costs is not None and costs.source.endswith("cycle_events.jsonl")
    modelled = sum(costs.cycles_seconds(record.table().simulate(Plan.fixed(16)))
                   for record in result.store.records())
    recorded = sum(e["draft_us"] + e["verify_us"] for e in events) / 1e6
    assert abs(modelled / recorded - 1) < 0.05
    replayed = [c.accepted for record in result.store.records()
                for c in record.table().simulate(Plan.fixed(16))]
    assert replayed == [e["acceptance_len"] for e in events]  # the recorded decode, cycle for cycle


def test_a_run_timing_one_verify_width_imports_unpriced_and_names_the_fit(tmp_path):
    """Reproduced (tutorial 11): a fixed block's run whose last blocks were not capped times one verify width
    and no plain step, and its import failed naming --ar-seconds, an option import-traces does not have."""
    lines = [json.loads(line) for line in _uncapped(tmp_path / "cycle_events.jsonl")]
    assert {line["verify_token_count"] for line in lines} == {16}
    result = import_traces(tmp_path / "cycle_events.jsonl", tmp_path / "store")
    assert result.requests == 6 and result.store.latency() is None
    assert "unpriced" in result.exact_for and "specpolicy bench from-run" in result.exact_for


def _uncapped(path: Path) -> list[str]:
    """:func:`write_cycles`'s run with every block whole (16), as a run whose budget ends on a block's end."""
    whole = {"block_len": 16, "verify_token_count": 16, "draft_us": 6_800.0}
    lines = [line | whole for line in write_cycles(path)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path.read_text().splitlines()


def test_a_cliff_at_12_rows_is_named_in_the_table_and_its_json(tmp_path):
    write_cycles(tmp_path / "adaptive.jsonl", blocks=tuple(range(1, 17)), budget=200)
    fitted = fit_cycles([c for run in read_cycles(tmp_path / "adaptive.jsonl").values() for c in run], "run")
    assert fitted.cliffs == (12,)
    assert any("cliff at 12 tokens verified" in w for w in fitted.table.warnings)
    fitted.table.save(tmp_path / "costs.json")
    assert "cliff at 12" in " ".join(json.loads((tmp_path / "costs.json").read_text())["warnings"])
    assert [r["cliff"] for r in fitted.rows() if r["cliff"]] == ["cliff"]
    smooth = fit_cycles([c for run in read_cycles(tmp_path / "adaptive.jsonl").values() for c in run
                         if c.verified < 12], "run")
    assert smooth.cliffs == ()


def test_a_csv_of_verifies_and_a_measured_drafter_pass(tmp_path):
    (tmp_path / "verifies.csv").write_text("tokens,seconds\n" + "".join(
        f"{n},{verify_us(n) / 1e6}\n" for n in (1, 2, 4, 8, 11, 12, 16) for _ in range(3)))
    fitted = fit_csv(tmp_path / "verifies.csv", draft_seconds=0.006)
    assert fitted.cliffs == (12,) and fitted.table.draft_seconds[16] == 0.006
    assert fitted.table.ar_seconds == pytest.approx(verify_us(1) / 1e6)
    (tmp_path / "bad.csv").write_text("# a comment\ntokens,seconds\n4,0.01\n\n5,nan\n")
    with pytest.raises(ValueError, match="line 5"):
        fit_csv(tmp_path / "bad.csv", draft_seconds=0.006)


def test_the_published_m5_max_curves_price_every_block_between_their_rows(tmp_path, monkeypatch):
    """mlx #3791's two shipped curves, read by name from any folder: the published forward by rows, the blocks
    between interpolated (said so), the drafter's pass the user's; the raised kernel limit saves 18% at 12."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["bench", "from-run", "mlx-3791-m5-max-70b-4bit-limit10",
                                      "--draft-seconds", "0.01", "--out", "m5.json", "--format", "json"])
    assert result.exit_code == 0, result.output
    slow = CostTable.load(tmp_path / "m5.json")
    fast = fit_csv(MEASURED_DIR / "mlx-3791-m5-max-70b-4bit-limit16.csv", draft_seconds=0.01).table
    assert slow.ar_seconds == pytest.approx(0.0764) and slow.verify_seconds[12] == pytest.approx(0.2946)
    assert slow.block_sizes == tuple(range(1, 13)) and fast.block_sizes == tuple(range(1, 17))
    assert slow.cycle_seconds(4) == pytest.approx(0.01 + (0.085 + 0.1082) / 2)
    assert any("interpolated" in w and "2, 4, 6-7, 9-11" in w for w in slow.warnings)
    assert fast.verify_seconds[12] / slow.verify_seconds[12] == pytest.approx(0.82, abs=0.005)
    with pytest.raises(ValueError, match="no entry for block size 16"):
        slow.cycle_seconds(16)
    typo = CliRunner().invoke(app, ["bench", "from-run", "mlx-3791-limit16", "--draft-seconds", "0.01"])
    assert typo.exit_code == 2 and "mlx-3791-m5-max-70b-4bit-limit16" in typo.output  # not "leave out"
    assert "leave --draft-seconds out" not in typo.output and not (tmp_path / "costs.json").exists()


@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e.pop("verify_us"), "lacks verify_us"),
    (lambda e: e.update(acceptance_len=-1), "integers >= 0"),
    (lambda e: e.update(commit_count=e["acceptance_len"] + 2), r"must be acceptance_len \+ 1"),
    (lambda e: e.update(acceptance_len=16, commit_count=17), "must be below verify_token_count"),
    (lambda e: e.update(verify_us=0), "verify_us must be above 0"),
    (lambda e: e.update(verify_us=float("nan")), "finite"),
    (lambda e: e.update(block_len=80, verify_token_count=80), "block_len must be in"),
    (lambda e: e.update(request_id=""), "request_id is ''"),  # issue 75 #8: ids "" and null were taken
    (lambda e: e.update(request_id=None), "request_id is None"),
])
def test_malformed_cycles_are_refused_in_one_line_before_anything_is_written(tmp_path, change, message):
    events = write_cycles(tmp_path / "run.jsonl", requests=2)
    change(events[3])
    (tmp_path / "run.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    with pytest.raises(ValueError, match=message) as refused:
        import_traces(tmp_path / "run.jsonl", tmp_path / "store")
    assert "\n" not in str(refused.value) and "line 4" in str(refused.value)
    assert not (tmp_path / "store").exists()


def test_repeated_cycles_an_adaptive_run_and_cut_verifies_are_refused(tmp_path):
    events = write_cycles(tmp_path / "run.jsonl", requests=2)
    (tmp_path / "twice.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events + events[:1]))
    with pytest.raises(ValueError, match="repeats or reorders cycle 1"):
        import_traces(tmp_path / "twice.jsonl", tmp_path / "a")
    write_cycles(tmp_path / "adaptive.jsonl", blocks=(16, 4))
    with pytest.raises(ValueError, match="an adaptive run"):
        import_traces(tmp_path / "adaptive.jsonl", tmp_path / "b")
    cut = [e | {"verify_token_count": min(e["block_len"], 8)} if e["acceptance_len"] < 8 else e
           for e in events]
    (tmp_path / "cut.jsonl").write_text("".join(json.dumps(e) + "\n" for e in cut))
    with pytest.raises(ValueError, match="verify_len_cap"):
        import_traces(tmp_path / "cut.jsonl", tmp_path / "c")
    with pytest.raises(ValueError, match="--candidates 16"):
        import_traces(tmp_path / "run.jsonl", tmp_path / "d", TraceArgs(candidates=[8]))
    for out in "abcd":
        assert not (tmp_path / out).exists()


def test_an_option_the_format_does_not_read_is_refused_not_ignored(tmp_path):
    """Issue 75 #8: --drafter, --requests or --seed given for a format that reads none of them was silently
    ignored."""
    write_cycles(tmp_path / "run.jsonl", requests=2)
    with pytest.raises(ValueError, match="does not read --drafter, --seed"):
        import_traces(tmp_path / "run.jsonl", tmp_path / "a", TraceArgs(given=frozenset({"drafter", "seed"})))
    assert not (tmp_path / "a").exists()
