"""Engine configurations priced as the engines run them: table-driven semantics, the export, the round
trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.replay.export import SglangConfig, VllmConfig, vllm_lookup, vllm_schedule
from specpolicy.state import DecodeState, DraftedBlock


@pytest.mark.parametrize(("drafts", "ranges"), [
    ({1: 15}, [[1, 1, 15]]),
    ({1: 7, 2: 7, 3: 3, 4: 3, 5: 0}, [[1, 2, 7], [3, 4, 3], [5, 5, 0]]),
    ({1: 3, 2: 1, 3: 3}, [[1, 1, 3], [2, 2, 1], [3, 3, 3]]),
    ({1: 3, 4: 3}, [[1, 4, 3]]),  # K holds from one given batch size up to the next
    ({1: 7, 4: 3, 8: 0}, [[1, 3, 7], [4, 7, 3], [8, 8, 0]]),
])
def test_vllm_schedule_merges_runs_of_equal_drafts(drafts, ranges):
    assert vllm_schedule(drafts) == ranges


# vllm/v1/spec_decode/dynamic/utils.py, build_dynamic_sd_schedule_lookup: dense[bs] =
# min(num_speculative_tokens, k)
@pytest.mark.parametrize(("n", "ranges", "dense"), [
    (15, [[1, 2, 7], [3, 4, 3]], {1: 7, 2: 7, 3: 3, 4: 3}),
    (1, [[1, 1, 3], [2, 3, 0]], {1: 1, 2: 0, 3: 0}),  # K = 3 above N = 1 runs as 1: the clamp
    (7, [], {}),
])
def test_vllm_clamps_every_entry_to_num_speculative_tokens(n, ranges, dense):
    assert vllm_lookup(n, ranges) == dense


# vllm/v1/spec_decode/dynamic/utils.py @14b450c, validate_and_normalize_dynamic_sd_schedule: 3-item entries,
# positive ranges with start <= end, K >= 0, ranges sorted (any order given) without overlap, the first from 1
# (reported: the read-back accepted schedules vLLM refuses at start-up)
@pytest.mark.parametrize(("ranges", "refused"), [
    ([[1, 2, 7], [2, 4, 3]], "overlap"),
    ([[2, 4, 3]], "start at batch size 1"),
    ([[1, 4, 1, 1024, 3]], "3-item"),
    ([[1, 0, 3]], "start >= 1, end >= start"),
    ([[1, 4, -1]], "K >= 0"),
    ([[3, 4, 3], [1, 2, 7]], (8, 4)),  # vLLM sorts the ranges first
    ([[1, 2, 7], [5, 8, 3]], (8, 8)),  # a gap runs the K before it, as vLLM's lookup fills it
])
def test_the_read_back_refuses_what_vllm_refuses(ranges, refused):
    config = {"method": "dflash", "num_speculative_tokens": 7,
              "num_speculative_tokens_per_batch_size": ranges}
    if isinstance(refused, tuple):  # accepted: the shape run at batch size 3
        assert VllmConfig.from_json(config).shape(3) == refused
        return
    with pytest.raises(ValueError, match=refused):
        VllmConfig.from_json(config)


SCHEDULE = [[1, 2, 7], [3, 8, 0]]


# vllm/v1/spec_decode/dflash.py: the proposer drafts 1 + num_speculative_tokens every step (B fixed);
# Dynamic SD narrows the verified drafts per batch size (L = K + 1); past the last range the last K holds.
@pytest.mark.parametrize(("config", "concurrency", "shape"), [
    ({"method": "dflash", "num_speculative_tokens": 15}, 1, (16, 16)),
    ({"method": "dflash", "num_speculative_tokens": 15, "num_speculative_tokens_per_batch_size": SCHEDULE}, 2,
     (16, 8)),
    ({"method": "dflash", "num_speculative_tokens": 15, "num_speculative_tokens_per_batch_size": SCHEDULE}, 5,
     (16, 1)),
    ({"method": "dflash", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 4, 7]]},
     9, (4, 4)),
])
def test_vllm_runs_a_fixed_block_and_a_verify_length_per_batch_size(config, concurrency, shape):
    parsed = VllmConfig.from_json(config)
    assert parsed.shape(concurrency) == shape
    plan, state = parsed.plan(), DecodeState.after_prefill(np.zeros(0, np.float32), 2)
    state.batch = concurrency  # a step scheduling that many requests
    assert (plan.block_size, plan.verify_length(state, DraftedBlock(shape[0]))) == shape


# python/sglang/srt/arg_groups/speculative_hook.py, _handle_dflash: --speculative-num-draft-tokens is the
# block size
@pytest.mark.parametrize(("block", "args"), [
    (16, ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
          "--speculative-num-draft-tokens", "16"]),
    (1, []),  # no speculation: no flags, not a 1-token block
])
def test_sglang_runs_one_static_block_size(block, args):
    config = SglangConfig(block, "d")
    assert config.args() == args and SglangConfig.from_args(args).block_size == block
    assert config.shape(1) == config.shape(8) == (block, block)


def test_a_config_that_is_not_dflash_is_refused():
    with pytest.raises(ValueError, match="method 'dflash'"):
        VllmConfig.from_json({"method": "eagle", "num_speculative_tokens": 3})


@pytest.fixture(scope="module")
def exported(replay_store, tmp_path_factory):
    from tests.replay.test_serving import linear_table

    folder = tmp_path_factory.mktemp("export")
    linear_table(batches=(1, 2, 4)).save(folder / "batch.json")
    result = CliRunner().invoke(app, ["export", "adaptive", "--sweep", str(replay_store.path),
                                      "--batch-costs", str(folder / "batch.json"), "--batch-sizes", "1-3",
                                      "--out", str(folder / "out.json")])
    assert result.exit_code == 0, result.output
    return folder, json.loads((folder / "out.json").read_text())


def test_the_exported_vllm_table_survives_vllms_clamp_and_drafts_what_was_priced(exported):
    _, document = exported
    config = document["vllm_speculative_config"]
    # none: one K
    n, ranges = config["num_speculative_tokens"], config.get("num_speculative_tokens_per_batch_size", [])
    dense = vllm_lookup(n, ranges)
    assert {row["batch_size"]: dense.get(row["batch_size"], n) for row in document["per_batch_size"]} == {
        row["batch_size"]: row["vllm_verified_drafts"] for row in document["per_batch_size"]}
    assert all(k <= n for _, _, k in ranges)  # the clamp changes nothing
    assert [r["batch_size"] for r in document["per_batch_size"]] == [1, 2, 3]
    assert config["model"] and config["method"] == "dflash"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_exported_config_read_back_and_priced_by_compare_gives_the_printed_speed(
        exported, replay_store, engine):
    folder, document = exported
    for row in document["per_batch_size"]:
        result = CliRunner().invoke(app, ["compare", "--sweep", str(replay_store.path), "--policies",
                                          f"fixed16,{engine}-config:{folder / 'out.json'}", "--concurrency",
                                          str(row["batch_size"]), "--batch-costs", str(folder / "batch.json"),
                                          "--format", "json"])
        assert result.exit_code == 0, result.output
        [priced] = [r for r in json.loads(result.stdout) if r["policy"].startswith(engine)]
        assert priced["speedup"] == pytest.approx(row[f"{engine}_speedup_over_ar"], rel=0.01)


def test_export_refuses_batch_sizes_the_table_lacks(replay_store, exported):
    folder, _ = exported
    too_far = CliRunner().invoke(app,
                                 ["export", "adaptive", "--sweep", str(replay_store.path), "--batch-costs",
                                       str(folder / "batch.json"), "--batch-sizes", "1-9"])
    assert too_far.exit_code == 2
    assert "up to 4, not 9: pass --batch-sizes 1-4" in " ".join(too_far.output.split())


def test_export_reads_the_store_once_for_every_concurrency(replay_store, tmp_path, monkeypatch):
    from specpolicy.sweep.store import SweepStore
    from tests.replay.test_serving import linear_table

    parsed, records, total = [], SweepStore.records, len(list(replay_store.records()))

    def counted(self, *args, **kwargs):
        for record in records(self, *args, **kwargs):
            parsed.append(record.prompt_id)
            yield record

    monkeypatch.setattr(SweepStore, "records", counted)
    linear_table(batches=(1, 2, 4)).save(tmp_path / "batch.json")
    result = CliRunner().invoke(app,
                                ["export", "adaptive", "--sweep", str(replay_store.path), "--batch-costs",
                                      str(tmp_path / "batch.json"), "--batch-sizes", "1-4"])
    assert result.exit_code == 0, result.output
    assert len(parsed) <= total + 1  # one full read (and the first record, for the logits' width)


def _export(replay_store, folder, policy: str, *extra: str) -> dict:
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2, 4)).save(folder / "batch.json")
    result = CliRunner().invoke(app, ["export", policy, "--sweep", str(replay_store.path), "--batch-costs",
                                      str(folder / "batch.json"), "--batch-sizes", "1-2", "--drafter",
                                      "/srv/d",
                                      *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# reported: export fixed16, fixed1, fixed4 and oracle wrote the same sections (num_speculative_tokens 3)
@pytest.mark.parametrize(("policy", "vllm_n", "sglang_block"), [
    ("fixed16", 15, "16"), ("fixed4", 3, "4"), ("fixed2", 1, "2"), ("fixed1", None, None)])
def test_export_writes_the_configuration_that_runs_the_policy(replay_store, tmp_path, policy, vllm_n,
                                                              sglang_block):
    document = _export(replay_store, tmp_path, policy)
    vllm, sglang = document["vllm_speculative_config"], document["sglang_args"]
    if vllm_n is None:  # a policy that never drafts: vLLM cannot run it, SGLang runs without speculation
        assert vllm is None and sglang == [] and "fastest_static" not in document
        return
    # reported: an empty schedule ([]), which vLLM's validator refuses, was written; no schedule means no key
    assert vllm["num_speculative_tokens"] == vllm_n and "num_speculative_tokens_per_batch_size" not in vllm
    assert vllm["model"] == "/srv/d"
    assert sglang[sglang.index("--speculative-num-draft-tokens") + 1] == sglang_block
    assert sglang[sglang.index("--speculative-draft-model-path") + 1] == "/srv/d"


def test_the_fastest_static_configuration_is_a_separate_request_printed_beside(replay_store, tmp_path):
    document = _export(replay_store, tmp_path, "fixed16", "--fastest")
    assert document["vllm_speculative_config"]["num_speculative_tokens"] == 15  # still the policy's own
    fastest = document["fastest_static"]
    assert fastest["vllm_speculative_config"]["method"] == "dflash" and "sglang_args" in fastest
    assert all("fastest_sglang_tokens_per_s" in row for row in document["per_batch_size"])


def test_a_never_drafting_export_reads_back_as_sglang_only(replay_store, tmp_path):
    (tmp_path / "ar.json").write_text(json.dumps(_export(replay_store, tmp_path, "fixed1")))
    result = CliRunner().invoke(app, ["compare", "--sweep", str(replay_store.path), "--policies",
                                      f"fixed16,vllm-config:{tmp_path / 'ar.json'}"])
    assert result.exit_code == 2 and "never drafts" in " ".join(result.output.split())


@pytest.mark.parametrize("tokens", [7.9, "7", True])
def test_a_vllm_config_with_a_fractional_token_count_is_refused(tokens):
    """Reproduced first: num_speculative_tokens 7.9 was read as 7."""
    with pytest.raises(ValueError, match="must be an integer >= 1, got "):
        VllmConfig.from_json({"method": "dflash", "num_speculative_tokens": tokens})


def test_reading_back_an_empty_schedule_is_refused_as_vllm_refuses_it():
    config = {"method": "dflash", "num_speculative_tokens": 15, "num_speculative_tokens_per_batch_size": []}
    with pytest.raises(ValueError, match=r"is \[\].*leave the key out"):
        VllmConfig.from_json(config)
    assert VllmConfig.from_json({"method": "dflash", "num_speculative_tokens": 15}).shape(8) == (16, 16)


def test_an_oracles_export_says_it_is_no_deployable_policy(replay_store, tmp_path):
    """Issue 54: an oracle's export read like any policy's: it plans from the sweep's measurements."""
    for name in ("oracle", "oracle-step"):
        document = _export(replay_store, tmp_path, name)
        assert "upper bound" in document["note"] and "not a policy a server can run" in document["note"]
    assert "note" not in _export(replay_store, tmp_path, "fixed16")


def test_each_message_on_stderr_is_one_line_in_a_log(replay_store, exported):
    """Reported: piped to a log, rich wrapped the per-concurrency lines at 80 columns ("... SGLang 1130.2" and
    "tok/s (modelled)" on two lines), so a log line was half a message."""
    folder, _ = exported
    result = CliRunner().invoke(app, ["export", "adaptive", "--sweep", str(replay_store.path),
                                      "--batch-costs", str(folder / "batch.json"), "--batch-sizes", "1-3",
                                      "--out", str(folder / "again.json")])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any(len(line) > 80 for line in lines)
    assert all(line.startswith(("concurrency ", "wrote ", "note: ")) for line in lines), lines


def test_an_export_under_a_file_is_refused_before_it_simulates(replay_store, tmp_path, monkeypatch):
    """Reproduced: `export --out FILE/x.json` simulated every concurrency and then failed to write ("Not a
    directory: FILE/x.json.tmp")."""
    from specpolicy.evaluation import export
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2)).save(tmp_path / "batch.json")
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(export, "export_for_engines", lambda *a, **k: pytest.fail("it simulated"))
    result = CliRunner().invoke(app, ["export", "fixed4", "--sweep", str(replay_store.path), "--batch-costs",
                                      str(tmp_path / "batch.json"), "--batch-sizes", "1-2", "--out",
                                      str(tmp_path / "file" / "x.json")])
    assert result.exit_code == 2
    assert "x.json's folder is a file; pass a file path in a folder" in result.stderr
