"""Exporting a policy as the static knobs serving engines read."""

from __future__ import annotations

import json

import pytest

from specpolicy.cycles import CycleRecord
from specpolicy.export import sglang_args, verified_drafts, vllm_config, vllm_schedule


@pytest.mark.parametrize(("drafts", "ranges"), [
    ({1: 15}, [[1, 1, 15]]),
    ({1: 7, 2: 7, 3: 3, 4: 3, 5: 0}, [[1, 2, 7], [3, 4, 3], [5, 5, 0]]),
    ({1: 3, 2: 1, 3: 3}, [[1, 1, 3], [2, 2, 1], [3, 3, 3]]),
    ({1: 3, 4: 3}, [[1, 4, 3]]),  # K holds from one simulated batch size up to the next
    ({1: 7, 4: 3, 8: 0}, [[1, 3, 7], [4, 7, 3], [8, 8, 0]]),
])
def test_vllm_schedule_merges_runs_of_equal_drafts(drafts, ranges):
    assert vllm_schedule(drafts) == ranges


def test_verified_drafts_is_a_token_weighted_median():
    ar, long = CycleRecord(1, 0, 1), CycleRecord(16, 15, 16)
    assert verified_drafts([ar] * 15 + [long]) == 15  # 16 tokens from one cycle outweigh 15 AR tokens
    assert verified_drafts([ar] * 17 + [long]) == 0
    assert verified_drafts([CycleRecord(16, 3, 4, verified=4)]) == 3  # L - 1, not B - 1
    assert verified_drafts([]) == 0


def test_engine_configs_state_b_as_k_plus_one():
    config = vllm_config({1: 7, 2: 3}, "z-lab/x")
    assert config["num_speculative_tokens"] == 7 and config["method"] == "dflash"
    assert sglang_args({1: 7, 2: 3}) == ["--speculative-num-draft-tokens", "8"]


def test_export_command(replay_store, tmp_path):
    from typer.testing import CliRunner

    from specpolicy.cli import app
    from tests.test_serving import linear_table

    linear_table(batches=(1, 2, 4)).save(tmp_path / "batch.json")
    result = CliRunner().invoke(app, ["export", "adaptive", "--sweep", str(replay_store.path), "--batch-costs",
                                      str(tmp_path / "batch.json"), "--batch-sizes", "1-3", "--out",
                                      str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "out.json").read_text())
    assert [r["batch_size"] for r in document["per_batch_size"]] == [1, 2, 3]
    schedule = document["vllm_speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[-1][1] == 3
    too_far = CliRunner().invoke(app, ["export", "adaptive", "--sweep", str(replay_store.path), "--batch-costs",
                                       str(tmp_path / "batch.json"), "--batch-sizes", "1-9"])
    assert too_far.exit_code == 2 and "measured up to 4" in " ".join(too_far.output.split())


def test_export_reads_the_store_once_for_every_concurrency(replay_store, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from specpolicy.cli import app
    from specpolicy.sweep.store import SweepStore
    from tests.test_serving import linear_table

    parsed, records, total = [], SweepStore.records, len(list(replay_store.records()))

    def counted(self, *args, **kwargs):
        for record in records(self, *args, **kwargs):
            parsed.append(record.prompt_id)
            yield record

    monkeypatch.setattr(SweepStore, "records", counted)
    linear_table(batches=(1, 2, 4)).save(tmp_path / "batch.json")
    result = CliRunner().invoke(app, ["export", "adaptive", "--sweep", str(replay_store.path), "--batch-costs",
                                      str(tmp_path / "batch.json"), "--batch-sizes", "1-4"])
    assert result.exit_code == 0, result.output
    assert len(parsed) <= total + 1  # one full read (and the first record, for the logits' width)
