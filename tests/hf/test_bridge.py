"""Checkpoint bridges: specpolicy (z-lab) DFlash drafter <-> transformers' MuseGlimmerAssistantModel."""

from __future__ import annotations

import json

import pytest
import torch

from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.sources import zoo_path
from tests.models.test_dflash import published_keys
from zoo_build.random_models import make_drafter, make_target

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "MuseGlimmerAssistantModel"):
    pytest.skip("transformers < 5.15 has no DFlash assistant", allow_module_level=True)

from specpolicy.hf import from_transformers_assistant, to_transformers_assistant  # noqa: E402
from specpolicy.hf.bridge import assistant_config  # noqa: E402


@pytest.fixture(scope="module")
def drafter() -> DFlashDrafter:
    return make_drafter(make_target(layers=4), layers=2)


def _inputs(drafter: DFlashDrafter, context: int = 7, block: int = 5, seed: int = 0):
    torch.manual_seed(seed)
    hidden = drafter.hidden_size
    features = torch.randn(1, context, len(drafter.target_layer_ids) * hidden)
    noise = torch.randn(1, block, hidden)
    return features, noise, torch.arange(context + block).unsqueeze(0)


def test_converted_assistant_computes_the_drafters_hidden_states(drafter):
    assistant = to_transformers_assistant(drafter)
    features, noise, positions = _inputs(drafter)
    with torch.no_grad():
        ours = drafter(noise, features, positions, drafter.new_cache())
        theirs = assistant(noise_embeds=noise, context_hidden_states=features,
                           position_ids=positions).last_hidden_state
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5)


def test_config_fields_translate_both_ways(drafter):
    config = assistant_config(drafter)
    assert (config.block_size, config.mask_token_id, config.target_layer_ids) == (
        drafter.block_size, drafter.mask_token_id, drafter.target_layer_ids)
    assert config.layer_types == ["full_attention"] * len(drafter.layers)
    assert config.rope_parameters["rope_theta"] == drafter.config.rope_parameters["rope_theta"]
    back = from_transformers_assistant(to_transformers_assistant(drafter), drafter.config.num_target_layers)
    assert back.config.dflash_config == drafter.config.dflash_config
    assert back.block_size == drafter.block_size
    assert back.config.num_target_layers == drafter.config.num_target_layers
    for key, value in drafter.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key


def test_zlab_folder_to_transformers_folder_and_back(tmp_path, drafter):
    """A z-lab checkpoint folder loads as an assistant; its save_pretrained folder loads back as a drafter."""
    drafter.save_pretrained(tmp_path / "zlab")
    assistant = to_transformers_assistant(tmp_path / "zlab")
    assistant.save_pretrained(tmp_path / "hf")
    saved = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert saved["model_type"] == "muse_glimmer_assistant" and "dflash_config" not in saved
    assert saved["mask_token_id"] == drafter.mask_token_id
    back = from_transformers_assistant(tmp_path / "hf", drafter.config.num_target_layers)
    assert set(back.state_dict()) >= published_keys(len(drafter.layers))
    features, noise, positions = _inputs(drafter, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(back(noise, features, positions), drafter(noise, features, positions))


def test_shipped_zoo_drafter_converts_exactly():
    zoo = DFlashDrafter.from_pretrained(zoo_path("tiny", "drafter"))
    assistant = to_transformers_assistant(zoo)
    assert type(assistant).__name__ == "MuseGlimmerAssistantModel"
    assert torch.equal(assistant.encoder.fc.weight, zoo.fc.weight)
    assert torch.equal(assistant.encoder.output_norm_enc.weight, zoo.hidden_norm.weight)


def test_bf16_conversion_keeps_rotary_frequencies_float32(drafter):
    assistant = to_transformers_assistant(drafter.to(torch.bfloat16))
    drafter.float()
    assert next(assistant.parameters()).dtype == torch.bfloat16
    assert all(b.dtype == torch.float32 for name, b in assistant.named_buffers() if "rotary" in name)


def test_sliding_window_assistant_is_refused(drafter):
    assistant = to_transformers_assistant(drafter)
    assistant.config.layer_types = ["sliding_attention"] * len(drafter.layers)
    assistant.config.sliding_window = 64
    with pytest.raises(ValueError, match="sliding window of 64"):
        from_transformers_assistant(assistant)


def test_attention_bias_is_refused():
    drafter = make_drafter(make_target(layers=4))
    drafter.config.attention_bias = True
    with pytest.raises(ValueError, match="biases"):
        to_transformers_assistant(drafter)


def test_other_models_are_refused():
    with pytest.raises(ValueError, match="muse_glimmer_assistant"):
        from_transformers_assistant(make_target())


def test_weights_that_do_not_fit_are_named(drafter):
    assistant = to_transformers_assistant(drafter)
    # config no longer fits its weights
    assistant.config.intermediate_size = 2 * assistant.config.intermediate_size
    with pytest.raises(ValueError, match="shapes differ at .*mlp"):
        from_transformers_assistant(assistant)


def test_convert_command_round_trips_a_checkpoint(tmp_path, drafter):
    from typer.testing import CliRunner

    from specpolicy.cli import app

    drafter.save_pretrained(tmp_path / "zlab")
    runner = CliRunner()
    first = runner.invoke(app, ["convert", str(tmp_path / "zlab"), str(tmp_path / "hf")])
    assert first.exit_code == 0, first.output
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "muse_glimmer_assistant"
    second = runner.invoke(app,
                           ["convert", str(tmp_path / "hf"), str(tmp_path / "back"), "--num-target-layers",
                            "4"])
    assert second.exit_code == 0, second.output
    back = DFlashDrafter.from_pretrained(tmp_path / "back")
    assert all(torch.equal(back.state_dict()[k], v) for k, v in drafter.state_dict().items())
    again = runner.invoke(app, ["convert", str(tmp_path / "zlab"), str(tmp_path / "hf")])
    assert again.exit_code == 2 and "exists" in again.output


def test_convert_infers_the_targets_depth_from_the_default_layer_formula(tmp_path):
    """convert once recorded max(target_layer_ids) + 1 (4 for the zoo, whose target has 6 layers)."""
    zoo = DFlashDrafter.from_pretrained(zoo_path("tiny", "drafter"))
    back = from_transformers_assistant(to_transformers_assistant(zoo))
    assert back.config.num_target_layers == zoo.config.num_target_layers


def test_convert_refuses_to_guess_a_depth_the_layer_ids_do_not_fix(drafter):
    assistant = to_transformers_assistant(drafter)
    assistant.config.target_layer_ids = [0, 3]  # not the default formula for any depth
    with pytest.raises(ValueError, match="--num-target-layers"):
        from_transformers_assistant(assistant)
