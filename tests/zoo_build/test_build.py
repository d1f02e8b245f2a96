"""Publishing the zoo stores weights in a smaller dtype that loads back exactly."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from zoo_build.build import store_weights_as
from zoo_build.random_models import make_target


def test_store_weights_as_bf16_loads_back_as_the_rounded_float32_weights(tmp_path):
    target = make_target()
    target.save_pretrained(tmp_path)
    store_weights_as(tmp_path, torch.bfloat16)
    stored = load_file(str(tmp_path / "model.safetensors"))
    assert {t.dtype for t in stored.values()} == {torch.bfloat16}
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
    for name, param in target.state_dict().items():
        if name in stored:
            assert torch.equal(loaded.state_dict()[name], param.to(torch.bfloat16).float()), name


def test_publish_swaps_a_finished_run_in_and_refuses_an_unfinished_one(tmp_path):
    """Training used to copy into the installed package itself, removing the old zoo first."""
    from zoo_build.build import publish
    from zoo_build.random_models import make_pair

    installed_target, installed_drafter = tmp_path / "pkg" / "target", tmp_path / "pkg" / "drafter"
    with pytest.raises(FileNotFoundError, match="nothing to publish"):
        publish(tmp_path / "run", target_dir=installed_target, drafter_dir=installed_drafter)
    target, drafter = make_pair()
    target.save_pretrained(str(tmp_path / "run" / "target"))
    drafter.save_pretrained(tmp_path / "run" / "drafter")
    installed_target.mkdir(parents=True)
    (installed_target / "config.json").write_text("{}")
    publish(tmp_path / "run", target_dir=installed_target, drafter_dir=installed_drafter)
    assert json.loads((installed_target / "config.json").read_text())["model_type"] == "qwen3"
    assert (installed_drafter / "model.safetensors").exists()
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["drafter", "target"]  # no staging left


@pytest.mark.parametrize("interrupt_at", [1, 2, 3, 4])
def test_a_publish_interrupted_at_any_rename_completes_when_rerun_or_loaded(
        tmp_path, monkeypatch, interrupt_at):
    """Reported: an interrupt at the wrong moment of `zoo publish` left the installed zoo without a drafter
    (or, between the two swaps, a new target beside the old drafter)."""
    from pathlib import Path

    from zoo_build.build import finish_publish, publish
    from zoo_build.random_models import make_pair

    target, drafter = make_pair()
    target.save_pretrained(str(tmp_path / "run" / "target"))
    drafter.save_pretrained(tmp_path / "run" / "drafter")
    installed = {kind: tmp_path / "pkg" / kind for kind in ("target", "drafter")}
    for folder in installed.values():
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"old": true}')
    real_rename, calls = Path.rename, []

    def rename(self, dest):
        calls.append(self)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return real_rename(self, dest)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        publish(tmp_path / "run", target_dir=installed["target"], drafter_dir=installed["drafter"])
    monkeypatch.setattr(Path, "rename", real_rename)
    finish_publish(installed["target"].parent)  # what the next publish or load does first
    for kind, folder in installed.items():
        assert "old" not in json.loads((folder / "config.json").read_text()), kind  # both new, never a mix
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["drafter", "target"]


@pytest.mark.parametrize(("args", "message"), [
    (["train", "everything"], "unknown step 'everything'"),
    (["card", "--run-dir", "FILE"], "is a file; pass the folder"),
])
def test_the_maintainers_cli_refuses_bad_input_before_any_work(tmp_path, args, message):
    from typer.testing import CliRunner

    from zoo_build.__main__ import app

    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a == "FILE" else a for a in args]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
