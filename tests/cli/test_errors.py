"""Bad input, as a new user types it: one message naming the problem and the fix, exit code 2, no
traceback."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.cli.errors import DEBUG

runner = CliRunner()


def fails(args: list[str], message: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), f"raised {result.exception!r}"
    assert "Traceback" not in result.output
    text = " ".join(result.stderr.split())
    assert message in text, text
    return text


@pytest.fixture()
def broken_drafters(test_zoo, tmp_path):
    """Drafter folders as users break them: truncated weights, empty weights, a target's folder."""
    _, drafter = test_zoo
    truncated, empty = tmp_path / "truncated", tmp_path / "empty"
    for folder in (truncated, empty):
        shutil.copytree(drafter, folder)
    weights = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    (empty / "model.safetensors").write_bytes(b"")
    return {"truncated": truncated, "empty": empty}


@pytest.mark.parametrize(("case", "message"), [
    ("truncated", "is damaged or truncated"),
    ("empty", "is damaged or truncated"),
    ("target", "is not a DFlash drafter"),
])
def test_broken_drafter_folders(test_zoo, broken_drafters, case, message):
    target, _ = test_zoo
    drafter = target if case == "target" else broken_drafters[case]
    fails(["generate", "hi", "--target", target, "--drafter", drafter, "--max-new-tokens", "2", "-b", "4"],
          message)


@pytest.mark.parametrize(("args", "message"), [
    (["generate", "hi", "--device", "foo"], "unknown device 'foo'; use cpu, cuda, cuda:N or auto"),
    (["generate", "hi", "--temperature", "inf"], "--temperature must be a finite number in [0, 100]"),
    (["generate", "caf\udce9"], "the prompt is not valid UTF-8 text"),
    (["compare", "--sweep", "SWEEP", "--dataset", "gsm8k", "--temperature", "0.7"],
     "--dataset, --temperature would be ignored"),
    (["compare", "--sweep", "SWEEP", "--seed", "3", "--target", "t", "--drafter", "d", "--device", "cuda",
      "--dtype", "bfloat16"], "--seed, --target, --drafter, --device, --dtype would be ignored"),
    (["compare", "--split", "validation"], "--split picks one side of a --sweep store"),
    (["compare", "--sweep", "SWEEP", "--split", "valid"], "unknown split 'valid'"),
    (["compare", "--mode", "live", "--policies", "fixed16,oracle"],
     "oracle reads a sweep store and cannot decode live"),
    (["compare", "--sweep", "SWEEP", "--plot", "TMP"], "must be a .png file path"),
    (["sweep", "--out", "FILE", "--max-samples", "1"], "is a file; pass a folder"),
    (["sweep", "--out", "FILE/sub", "--max-samples", "1"], "lies under the file"),
    (["import-blockpilot", "BP", "--out", "TMP/store"], "holds a JSON list; expected an object"),
    # found by this stop's audit: each was silently ignored
    (["generate", "hi", "--server", "TMP/llama-server"], "--server is the llama-server --engine runs"),
    (["export", "fixed16", "--server", "TMP/llama-server"], "--server is the llama-server --engine runs"),
    (["export", "fixed16", "--engine", "llamacpp", "--sweep", "SWEEP", "--batch-sizes", "1,2"],
     "--engine llamacpp writes llama-server command lines; --sweep, --batch-sizes would be ignored"),
])
def test_bad_input_fails_before_any_model_loads(tmp_path, args, message):
    from specpolicy.envs.replay_data import shipped_sweep

    (tmp_path / "file").write_text("x")
    (tmp_path / "gsm8k_0T0.0").mkdir()
    (tmp_path / "gsm8k_0T0.0" / "16.json").write_text(json.dumps([1, 2]))
    where = {"SWEEP": str(shipped_sweep("test").path), "TMP": str(tmp_path), "FILE": str(tmp_path / "file"),
             "BP": str(tmp_path / "gsm8k_0T0.0")}
    fails([where.get(a.split("/")[0], a.split("/")[0]) + a[len(a.split("/")[0]):] for a in args], message)


def test_debug_shows_the_traceback():
    result = runner.invoke(app, ["--debug", "generate", "hi", "--device", "foo"])
    DEBUG["on"] = False
    assert isinstance(result.exception, ValueError) and "unknown device" in str(result.exception)


@pytest.mark.parametrize("command", [["generate", "hi"], ["compare", "--policies", "fixed16,blockpilot"]])
def test_a_policy_of_another_vocabulary_fails_before_any_model_work(test_zoo, command):
    """The default BlockPilot (the zoo's 4,096 logits) used to fail only after a whole sweep of another
    target."""
    target, drafter = test_zoo
    fails([*command, "--target", target, "--drafter", drafter],
          "reads logits over a vocabulary of 4096 but target")


def test_a_hub_id_typo_offline_is_one_message(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the hub reads the variable once, at import: once anything imported it, only the constant switches it
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    fails(["generate", "hi", "--target", "Qwen/Qwen3-4Bx", "-b", "4"], "cannot load target 'Qwen/Qwen3-4Bx'")


@pytest.mark.parametrize(("error", "code", "says"), [
    # `specpolicy zoo info | head -3`: the reader left, not a bug
    (BrokenPipeError(32, "Broken pipe"), 0, ""),
    (OSError(27, "File too large", "runs/x/records.jsonl"), 2, "File too large: runs/x/records.jsonl"),
    (OSError(30, "Read-only file system", "/ro/out"), 2, "Read-only file system: /ro/out"),
])
def test_user_side_os_failures_never_say_bug(error, code, says, capsys):
    import typer

    from specpolicy.cli.errors import guarded

    def command():
        raise error

    with pytest.raises(typer.Exit) as exit_info:
        guarded(command)()
    assert exit_info.value.exit_code == code
    printed = capsys.readouterr().err
    assert "bug" not in printed and says in printed


def test_a_block_size_above_the_limit_is_refused_by_generate_before_any_model_work():
    """`generate -b 10000` once drafted 2,030-token blocks at 0.5 tok/s; sweeps refused the same size."""
    result = CliRunner().invoke(app, ["generate", "hi", "-b", "10000", "--target", "no-such-model"])
    assert result.exit_code == 2
    assert "less than or equal" in result.output and "64" in result.output
    assert "no-such-model" not in result.output


def test_generate_with_the_papers_blockpilot_runs_over_its_own_classes(test_zoo):
    """`generate --policy blockpilot-paper` once failed suggesting --candidates, a flag generate lacks: a
    learned policy acts over the classes it was trained on, whatever the default candidates."""
    from specpolicy.registry import create_policy

    policy = create_policy("blockpilot-paper")  # trained over 14..18; the default candidates are 1..32
    assert policy.choices() == {14, 15, 16, 17, 18}


def test_export_names_no_flag_it_lacks(replay_store, tmp_path):
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2)).save(tmp_path / "batch.json")
    result = CliRunner().invoke(app, ["export", "fixed32", "--sweep", str(replay_store.path), "--batch-costs",
                                      str(tmp_path / "batch.json"), "--batch-sizes", "1-2"])
    assert result.exit_code == 2 and "missing [32]" in result.output
    said = " ".join(result.output.split())
    assert "pass --candidates" not in said and "specpolicy sweep --candidates" in said
