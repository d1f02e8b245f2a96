"""The sweep store: append-only, resumable, checksummed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from specpolicy.sweep.records import SweepRecord, checksum
from specpolicy.sweep.resume import check_resumable
from specpolicy.sweep.store import CorruptRecordWarning, StoreLockedError, SweepStore

META = {"candidates": [14, 16], "temperature": 0.0, "max_new_tokens": 8, "seed": 0, "target": "t",
        "drafter": "d",
        "dataset": "x", "mode": "replay"}


def _record(i: int) -> SweepRecord:
    return SweepRecord(version=2, prompt_id=f"p{i}", index=i, prompt_length=3, taus={14: 2.0, 16: 2.5 + i})


def _open(path, meta=META) -> SweepStore:
    """Create or resume a store and release its write lock (as a finished sweep does)."""
    with SweepStore.open(path, meta) as store:
        return store


def test_append_read_and_resume(tmp_path):
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(0), torch.arange(5.0))
        store.append(_record(1), torch.arange(5.0) * 2)
    again = _open(tmp_path / "s")
    assert again.done_ids() == {"p0", "p1"}
    records = list(again.records())
    assert [r.prompt_id for r in records] == ["p0", "p1"]
    assert again.features(records[1]).tolist() == (np.arange(5.0) * 2).tolist()
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["schema"] == "specpolicy.sweep/1"


def test_resume_with_other_settings_fails(tmp_path):
    _open(tmp_path / "s")
    with pytest.raises(ValueError, match=r"candidates: stored \[14, 16\] vs requested \[14, 15\]"):
        _open(tmp_path / "s", {**META, "candidates": [14, 15]})


def test_resume_with_other_weights_under_the_same_name_fails(tmp_path):
    _open(tmp_path / "s", {**META, "models": {"target_fingerprint": "aaaa", "drafter_fingerprint": "d"}})
    _open(tmp_path / "s", {**META, "models": {"target_fingerprint": "aaaa", "drafter_fingerprint": "d"}})
    with pytest.raises(ValueError, match="target_fingerprint: stored aaaa vs loaded bbbb"):
        _open(tmp_path / "s", {**META, "models": {"target_fingerprint": "bbbb", "drafter_fingerprint": "d"}})


def test_torn_and_corrupted_records_are_reported_and_skipped(tmp_path):
    with SweepStore.open(tmp_path / "s", META) as store:
        for i in range(3):
            store.append(_record(i))
    lines = (tmp_path / "s" / "records.jsonl").read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["taus"]["16"] = 9.0
    lines[1] = json.dumps(tampered)
    (tmp_path / "s" / "records.jsonl").write_text("\n".join(lines) + "\n" + '{"prompt_id": "p3", "ind')
    with pytest.warns(CorruptRecordWarning):
        good = [r.prompt_id for r in store.records()]
    assert good == ["p0", "p2"]
    assert len(store.report.corrupted) == 2
    assert any("checksum mismatch" in m for m in store.report.corrupted)
    assert any("torn" in m for m in store.report.corrupted)
    assert store.done_ids() == {"p0", "p2"}  # a rerun redoes p1 and p3


def test_damaged_features_file_fails_with_its_name(tmp_path):
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(0), torch.ones(4))
    record = next(store.records())
    (tmp_path / "s" / record.features).write_bytes(b"garbage")
    with pytest.raises(ValueError, match="does not match its checksum"):
        store.features(record)


def test_loading_a_folder_that_is_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a sweep store"):
        SweepStore.load(tmp_path)


def test_import_blockpilot_layout_and_evaluate(tmp_path):
    from specpolicy.evaluation.metrics import summarize
    from specpolicy.evaluation.replay import evaluate_replay
    from specpolicy.registry import get_registry
    from specpolicy.sweep.importers import import_blockpilot

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    for size in (14, 15, 16, 17, 18):
        (folder / f"{size}.json").write_text(json.dumps({"0": 6.0 + (size == 15), "1": 6.0 + (size == 18)}))
    store, _ = import_blockpilot(folder, tmp_path / "store")
    assert store.candidates == (14, 15, 16, 17, 18) and len(store.done_ids()) == 2
    policies = [get_registry().create(n, store.candidates) for n in ("fixed16", "oracle")]
    rows = {r.policy: r for r in summarize(evaluate_replay(store, policies), n_bootstrap=100)}
    assert rows["oracle"].tau == 7.0 and rows["fixed16"].tau == 6.0  # no cost table: the tau oracle
    assert rows["oracle"].timing == "none"
    with pytest.raises(ValueError, match="has no features"):
        store.features(next(store.records()))


# --- issue 15: a store that cannot hold wrong data
# -------------------------------------------------------------


def test_a_second_writer_is_refused_while_the_first_holds_the_store(tmp_path):
    with SweepStore.open(tmp_path / "s", META), pytest.raises(StoreLockedError,
                                                              match="another process is writing"):
        SweepStore.open(tmp_path / "s", META)
    _open(tmp_path / "s")  # released: resumable again


def test_a_writer_that_may_wait_waits_for_the_first_and_is_told_so(tmp_path):
    """Reported: two compares on one cache failed instead of waiting (compare's cache opens with ``wait``)."""
    first = SweepStore.open(tmp_path / "s", META)
    told: list = []
    threading.Timer(0.3, first.close).start()
    start = time.monotonic()
    with SweepStore.open(tmp_path / "s", META, wait=told.append) as second:
        assert told == [tmp_path / "s"] and time.monotonic() - start >= 0.25
        assert second.meta["candidates"] == META["candidates"]


def test_a_torn_last_line_does_not_eat_the_next_record(tmp_path):
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(0))
    with open(tmp_path / "s" / "records.jsonl", "a") as handle:
        handle.write('{"prompt_id": "p1", "ind')  # a disk-full cut
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(2))
    with pytest.warns(CorruptRecordWarning):
        assert [r.prompt_id for r in store.records()] == ["p0", "p2"]


@pytest.mark.parametrize(("line", "problem"), [
    (b"\xff\xfe not utf-8\n", "not UTF-8"),
    (b"[1, 2, 3]\n", "JSON list, not a record object"),
    (b"\"text\"\n", "JSON str, not a record object"),
])
def test_malformed_lines_are_reported_and_skipped(tmp_path, line, problem):
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(0))
    with open(tmp_path / "s" / "records.jsonl", "ab") as handle:
        handle.write(line)
    with pytest.warns(CorruptRecordWarning, match=problem):
        assert [r.prompt_id for r in store.records()] == ["p0"]
    assert store.done_ids() == {"p0"}


def test_a_record_with_tau_above_its_block_size_is_refused(tmp_path):
    with pytest.raises(ValueError, match="taus out of range"):
        SweepRecord(prompt_id="p", index=0, taus={1: 16.5})
    body = {"prompt_id": "p", "index": 0, "taus": {"14": 20.0}}
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "meta.json").write_text(json.dumps({"schema": "specpolicy.sweep/1", **META}))
    (tmp_path / "s" / "records.jsonl").write_text(json.dumps({**body, "checksum": checksum(body)}) + "\n")
    store = SweepStore.load(tmp_path / "s")
    with pytest.warns(CorruptRecordWarning, match="invalid record"):
        assert list(store.records()) == []


@pytest.mark.parametrize(("key", "value"),
                         [("dtype", "bfloat16"), ("max_prompt_tokens", 64), ("device", "cuda"),
                                            ("dataset_sha256", "0123"), ("verify_lengths", True),
                                            ("confidence_sizes", [16])])
def test_resume_with_a_setting_that_changes_results_is_refused(tmp_path, key, value):
    meta = {**META, "dtype": "float32", "max_prompt_tokens": 256, "device": "cpu", "dataset_sha256": "abcd"}
    _open(tmp_path / "s", meta)
    with pytest.raises(ValueError, match=f"{key}: stored"):
        check_resumable(tmp_path / "s", {**meta, key: value})


def test_out_that_is_a_file_or_a_foreign_folder_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        check_resumable(tmp_path / "file", META)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="non-empty folder without meta.json"):
        check_resumable(tmp_path / "other", META)


def test_shipped_version_1_records_still_read():
    from specpolicy.envs.replay_data import shipped_sweep

    store = shipped_sweep("test")
    record = next(store.records())
    assert record.version == 1 and record.replay is not None and store.features(record).ndim == 1


def test_import_blockpilot_skips_the_authors_predictor_file(tmp_path):
    """``1.json`` holds the predictor's chosen sizes, not tau at B = 1; it was read as tau (16.5 at B = 1)."""
    from specpolicy.sweep.importers import import_blockpilot

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    (folder / "1.json").write_text(json.dumps({"0": 16.5}))
    for size in (14, 16):
        (folder / f"{size}.json").write_text(json.dumps({"0": 6.0}))
    store, _ = import_blockpilot(folder, tmp_path / "store")
    assert store.candidates == (14, 16) and next(store.records()).taus == {14: 6.0, 16: 6.0}


@pytest.mark.parametrize(("sizes", "candidates", "message"), [
    ((16, 100), None, "100.json: block sizes above 64"),  # imported as block size 100 without a word
    ((14, 16), "14,16", "^candidates"),  # from Python, read letter by letter ("none of [',', '1', '4', '6']")
    ((14, 16), [0], "^candidates"),
    ((14, 16), [16, 16], "^candidates"),
])
def test_import_blockpilot_refuses_sizes_no_engine_runs_and_candidates_the_command_refuses(
        tmp_path, sizes, candidates, message):
    from specpolicy.sweep.importers import import_blockpilot

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    for size in sizes:
        (folder / f"{size}.json").write_text(json.dumps({"0": 6.0}))
    with pytest.raises(ValueError, match=message):
        import_blockpilot(folder, tmp_path / "store", candidates)
    assert not (tmp_path / "store").exists()


@pytest.mark.slow  # reads the shipped 480-prompt store five times
def test_every_way_to_get_a_shipped_split_yields_exactly_its_prompts():
    """`default_sweep("validation")` (now shipped_sweep) once returned the whole training store."""
    from specpolicy.envs.block_size import BlockSizeEnv
    from specpolicy.envs.replay_data import shipped_sweep
    from specpolicy.evaluation.replay import evaluate_replay
    from specpolicy.registry import create_policy

    ids = {split: {r.prompt_id for r in shipped_sweep(split).records()}
           for split in ("train", "validation", "test")}
    assert all(ids.values())
    assert not ids["train"] & ids["validation"] and not ids["test"] & (ids["train"] | ids["validation"])
    whole = {r.prompt_id for r in SweepStore.load(shipped_sweep("train").path).records()}
    assert ids["train"] | ids["validation"] == whole
    assert set(BlockSizeEnv(split="validation", features="compact").source.prompt_ids) == ids["validation"]
    [result] = evaluate_replay(shipped_sweep("validation"), [create_policy("fixed16")])
    assert {p.prompt_id for p in result.prompts} == ids["validation"]


def test_a_split_of_any_store_is_its_validation_hash_side(replay_store):
    train, validation = (SweepStore.load(replay_store.path, split=s) for s in ("train", "validation"))
    train_ids, validation_ids = ({r.prompt_id for r in s.records()} for s in (train, validation))
    assert train_ids and not train_ids & validation_ids
    assert train_ids | validation_ids == {r.prompt_id for r in replay_store.records()}
    with pytest.raises(ValueError, match="unknown split 'valid'.*train, validation"):
        SweepStore.load(replay_store.path, split="valid")


def test_a_store_killed_before_its_meta_was_written_resumes(tmp_path):
    """A kill between taking the lock and writing meta.json left a store no sweep could resume."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / ".lock").touch()
    (tmp_path / "s" / "features").mkdir()
    (tmp_path / "s" / "meta.tmp").write_text('{"schema": ')  # a torn write of meta.json's temporary file
    check_resumable(tmp_path / "s", {"candidates": [4]})  # no error: nothing was recorded yet
    (tmp_path / "s" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="non-empty folder without meta.json"):
        check_resumable(tmp_path / "s", {"candidates": [4]})


def test_a_record_whose_features_file_is_damaged_is_skipped_counted_and_swept_again(tmp_path):
    """Reported: a corrupt features file passed resume ("2 prompts recorded"), then compare failed the whole
    store and asked for a hand edit of records.jsonl. Now the record counts as bad: reading skips it with a
    report, and a resume sweeps that prompt again."""
    with SweepStore.open(tmp_path / "s", META) as store:
        store.append(_record(0), torch.ones(4))
        store.append(_record(1), torch.ones(4) * 2)
    damaged = next(store.records())
    (tmp_path / "s" / damaged.features).write_bytes(b"garbage")
    with pytest.warns(CorruptRecordWarning, match="features file"):
        assert [r.prompt_id for r in store.records()] == ["p1"]
    assert store.done_ids() == {"p1"}  # a resume redoes p0
    with SweepStore.open(tmp_path / "s", META) as resumed:
        resumed.append(_record(0), torch.ones(4))
    assert sorted(r.prompt_id for r in resumed.records()) == ["p0", "p1"]
    assert resumed.features(next(r for r in resumed.records() if r.prompt_id == "p0")).tolist() == [1.0] * 4


def test_import_blockpilot_defaults_to_the_papers_sizes_and_reads_the_authors_choices(tmp_path):
    """Reported: the importer kept 4..32 while the paper's oracle ranges over 14..18 (so the oracle read 6.74
    where the paper reads 6.74 over 14..18 only by luck of --candidates), and dropped 1.json silently: it
    holds the authors' per-prompt choices."""
    from typer.testing import CliRunner

    from specpolicy.cli import app

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    for size in (4, 8, 14, 15, 16, 17, 18, 32):
        (folder / f"{size}.json").write_text(json.dumps({"0": min(size,
                                                                  6.0 + (size == 15) + 2 * (size == 32)),
                                                         "1": min(size, 6.0 + (size == 18))}))
    (folder / "1.json").write_text(json.dumps({"0": 15, "1": 17}))
    (folder / "mapped_from_1.json").write_text("{}")  # issue 48: ignored without a word
    result = CliRunner().invoke(app, ["import-blockpilot", str(folder), "--out", str(tmp_path / "s")])
    output = " ".join(result.output.split())
    assert result.exit_code == 0, output
    assert "not imported (not a '{B}.json' of taus): mapped_from_1.json" in output
    store = SweepStore.load(tmp_path / "s")
    assert store.candidates == (14, 15, 16, 17, 18) and "the paper's 14..18" in output
    assert "1 of 2 prompts" in output  # the authors' choices against the best tau over 14..18
    assert json.loads((tmp_path / "s" / "authors_choices.json").read_text()) == {"gsm8k:0": 15, "gsm8k:1": 17}
    wide = CliRunner().invoke(app, ["import-blockpilot", str(folder), "--out", str(tmp_path / "w"),
                                    "--candidates", "4-32"])
    assert wide.exit_code == 0
    assert SweepStore.load(tmp_path / "w").candidates == (4, 8, 14, 15, 16, 17, 18, 32)


def _authors_folder(root, taus: dict, choices: dict | None = None, name: str = "gsm8k_0T0.0"):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for size, by_prompt in taus.items():
        (folder / f"{size}.json").write_text(json.dumps(by_prompt))
    if choices is not None:
        (folder / "1.json").write_text(json.dumps(choices))
    return folder


def test_import_blockpilot_refuses_a_changed_or_other_folder_into_the_same_store(tmp_path):
    """Reproduced first: a re-import of a changed folder kept the old taus, and another folder of the same
    name was silently skipped."""
    from specpolicy.sweep.importers import import_blockpilot
    from specpolicy.sweep.resume import StoreUnusableError

    folder = _authors_folder(tmp_path, {14: {"0": 6.0}, 16: {"0": 7.0}})
    import_blockpilot(folder, tmp_path / "store")
    import_blockpilot(folder, tmp_path / "store")  # the same files: nothing to do
    (folder / "16.json").write_text(json.dumps({"0": 5.0}))
    with pytest.raises(StoreUnusableError, match="dataset_sha256"):
        import_blockpilot(folder, tmp_path / "store")
    other = _authors_folder(tmp_path / "elsewhere", {14: {"0": 1.0}, 16: {"0": 2.0}})
    with pytest.raises(StoreUnusableError, match="dataset_sha256"):
        import_blockpilot(other, tmp_path / "store")
    assert next(SweepStore.load(tmp_path / "store").records()).taus == {14: 6.0, 16: 7.0}


def test_the_authors_choices_count_ties_as_hits_and_run_as_a_policy(tmp_path):
    """Reproduced first: a choice tied with the best tau counted as a miss, and no policy could evaluate
    1.json."""
    from specpolicy.evaluation.metrics import summarize
    from specpolicy.evaluation.replay import evaluate_replay
    from specpolicy.registry import create_policy
    from specpolicy.sweep.importers import agreement, import_blockpilot

    taus = {14: {"0": 6.0, "1": 5.0, "2": 4.0}, 16: {"0": 6.0, "1": 7.0, "2": 4.0}}
    folder = _authors_folder(tmp_path, taus, choices={"0": 14, "1": 14, "2": 16})
    store, choices = import_blockpilot(folder, tmp_path / "store")
    # prompt 0: a tie (6.0 = 6.0); prompt 1: a miss; prompt 2: a tie
    assert agreement(store, choices) == (2, 3)
    policy = create_policy(f"choices:{tmp_path / 'store' / 'authors_choices.json'}")
    rows = {r.policy: r for r in summarize(evaluate_replay(store, [policy]), n_bootstrap=10)}
    assert rows[policy.name].tau == pytest.approx((6.0 + 5.0 + 4.0) / 3)


def test_a_tau_only_store_is_compared_by_tau_without_empty_speed_columns(tmp_path):
    """Issue 48: an imported tau-only store printed 'none time', nine '-' columns and a legend about speed."""
    from typer.testing import CliRunner

    from specpolicy.cli import app

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    for size in range(14, 19):
        (folder / f"{size}.json").write_text(json.dumps({str(i): 2.0 + (i * size) % 5 for i in range(6)}))
    assert CliRunner().invoke(app,
                              ["import-blockpilot", str(folder), "--out", str(tmp_path / "s")]).exit_code == 0
    result = CliRunner().invoke(app,
                                ["compare", "--sweep", str(tmp_path / "s"), "--policies",
                                 "fixed16,oracle-tau"])
    assert result.exit_code == 0, result.output
    assert "taus only" in result.output and "none time" not in result.output
    assert "speedup" not in result.stdout
    assert "tau - fixed16's" in result.stdout and "records tau only" in result.output


def test_the_docs_shipped_sweeps_and_tables_open_from_any_folder(tmp_path, monkeypatch):
    """Reproduced first: the docs name shipped sweeps and tables by their checkout paths
    (`--sweep specpolicy/zoo/tiny/sweeps/sharegpt`, `--costs specpolicy/zoo/measured/NAME.json`), which a pip
    install's user, in a folder of their own, could not open; a bare sweep name neither."""
    from specpolicy.costs import CostTable

    monkeypatch.chdir(tmp_path)
    for name in ("specpolicy/zoo/tiny/sweeps/sharegpt", "sharegpt"):
        assert SweepStore.load(name).meta["dataset"] == "sharegpt"
    table = "specpolicy/zoo/measured/cast-h100-sxm-llama-3.1-8b-context-1024.json"
    assert CostTable.load(table).block_sizes == CostTable.load(Path(table).stem).block_sizes
    (tmp_path / "sharegpt").mkdir()  # a folder of the user's own goes first, and is named if it is no store
    with pytest.raises(FileNotFoundError, match="sharegpt is not a sweep store"):
        SweepStore.load("sharegpt")
    # a shipped folder that is no store is not offered as one (the fix said: sweep into the package)
    with pytest.raises(FileNotFoundError, match=r"^specpolicy/zoo is not a sweep store .* --out specpolicy/"):
        SweepStore.load("specpolicy/zoo")
