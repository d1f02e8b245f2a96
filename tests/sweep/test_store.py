"""The sweep store: append-only, resumable, checksummed."""

from __future__ import annotations

import json

import pytest
import torch

from specpolicy.sweep.store import CorruptRecordWarning, SweepStore

META = {"candidates": [14, 16], "temperature": 0.0, "max_new_tokens": 8, "seed": 0, "target": "t", "drafter": "d",
        "dataset": "x", "mode": "replay"}


def _record(i: int) -> dict:
    return {"prompt_id": f"p{i}", "index": i, "prompt_length": 3, "taus": {"14": 2.0, "16": 2.5 + i}}


def test_append_read_and_resume(tmp_path):
    store = SweepStore.open(tmp_path / "s", META)
    store.append(_record(0), torch.arange(5.0))
    store.append(_record(1), torch.arange(5.0) * 2)
    again = SweepStore.open(tmp_path / "s", META)
    assert again.done_ids() == {"p0", "p1"}
    records = list(again.records())
    assert [r["prompt_id"] for r in records] == ["p0", "p1"]
    assert torch.equal(again.features(records[1]), torch.arange(5.0) * 2)
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["schema"] == "specpolicy.sweep/1"


def test_resume_with_other_settings_fails(tmp_path):
    SweepStore.open(tmp_path / "s", META)
    with pytest.raises(ValueError, match=r"candidates: stored \[14, 16\] vs requested \[14, 15\]"):
        SweepStore.open(tmp_path / "s", {**META, "candidates": [14, 15]})


def test_resume_with_other_weights_under_the_same_name_fails(tmp_path):
    SweepStore.open(tmp_path / "s", {**META, "models": {"target_fingerprint": "aaaa", "drafter_fingerprint": "d"}})
    SweepStore.open(tmp_path / "s", {**META, "models": {"target_fingerprint": "aaaa", "drafter_fingerprint": "d"}})
    with pytest.raises(ValueError, match="target_fingerprint: stored aaaa vs loaded bbbb"):
        SweepStore.open(tmp_path / "s", {**META, "models": {"target_fingerprint": "bbbb", "drafter_fingerprint": "d"}})


def test_torn_and_corrupted_records_are_reported_and_skipped(tmp_path):
    store = SweepStore.open(tmp_path / "s", META)
    for i in range(3):
        store.append(_record(i))
    lines = (tmp_path / "s" / "records.jsonl").read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["taus"]["16"] = 99.0
    lines[1] = json.dumps(tampered)
    (tmp_path / "s" / "records.jsonl").write_text("\n".join(lines) + "\n" + '{"prompt_id": "p3", "ind')
    with pytest.warns(CorruptRecordWarning):
        good = [r["prompt_id"] for r in store.records()]
    assert good == ["p0", "p2"]
    assert len(store.report.corrupted) == 2
    assert any("checksum mismatch" in m for m in store.report.corrupted)
    assert any("torn" in m for m in store.report.corrupted)
    assert store.done_ids() == {"p0", "p2"}  # a rerun redoes p1 and p3


def test_damaged_features_file_fails_with_its_name(tmp_path):
    store = SweepStore.open(tmp_path / "s", META)
    store.append(_record(0), torch.ones(4))
    record = next(store.records())
    (tmp_path / "s" / record["features"]).write_bytes(b"garbage")
    with pytest.raises(ValueError, match="does not match its checksum"):
        store.features(record)


def test_loading_a_folder_that_is_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a sweep store"):
        SweepStore.load(tmp_path)


def test_import_blockpilot_layout_and_evaluate(tmp_path):
    from specpolicy.evaluate import evaluate_replay
    from specpolicy.metrics import summarize
    from specpolicy.registry import get_registry
    from specpolicy.sweep.importers import import_blockpilot

    folder = tmp_path / "gsm8k_0T0.0"
    folder.mkdir()
    for size in (14, 15, 16, 17, 18):
        (folder / f"{size}.json").write_text(json.dumps({"0": 6.0 + (size == 15), "1": 6.0 + (size == 18)}))
    store = import_blockpilot(folder, tmp_path / "store")
    assert store.candidates == (14, 15, 16, 17, 18) and len(store.done_ids()) == 2
    policies = [get_registry().create(n, store.candidates) for n in ("fixed16", "oracle")]
    rows = {r.policy: r for r in summarize(evaluate_replay(store, policies), n_bootstrap=100)}
    assert rows["oracle"].tau == 7.0 and rows["fixed16"].tau == 6.0  # no cost table: the tau oracle
    assert rows["oracle"].timing == "none"
    with pytest.raises(ValueError, match="has no features"):
        store.features(next(store.records()))
