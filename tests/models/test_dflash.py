"""The DFlash drafter: checkpoint layout, round trips, and load-time compatibility checks."""

from __future__ import annotations

import json

import pytest
import torch

from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.dflash_config import default_target_layer_ids
from specpolicy.models.loading import check_compatible, load_drafter
from specpolicy.models.target import new_cache, target_forward
from zoo_build.random_models import make_drafter, make_target

PUBLISHED_TOP = {"fc.weight", "hidden_norm.weight", "norm.weight"}
PUBLISHED_LAYER = [
    "input_layernorm.weight", "post_attention_layernorm.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
]


def published_keys(layers: int) -> set[str]:
    """The key list of the z-lab Qwen3 DFlash checkpoints (no ``model.`` prefix)."""
    return PUBLISHED_TOP | {f"layers.{i}.{name}" for i in range(layers) for name in PUBLISHED_LAYER}


def test_default_target_layer_ids():
    assert default_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert default_target_layer_ids(36, 1) == [18]
    assert default_target_layer_ids(6, 2) == [1, 3]
    assert default_target_layer_ids(6, 5) == [1, 2, 2, 2, 3]  # Python rounding, as upstream


def test_save_load_round_trip_matches_published_layout(tmp_path):
    target = make_target(layers=6)
    drafter = make_drafter(target, layers=5)
    drafter.save_pretrained(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == published_keys(5)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["block_size"] == 16 and config["num_target_layers"] == 6
    assert config["dflash_config"] == {"mask_token_id": 96, "target_layer_ids": [1, 2, 2, 2, 3]}
    assert config["architectures"] == ["DFlashDraftModel"]
    loaded = DFlashDrafter.from_pretrained(tmp_path)
    block = torch.randn(1, 5, 32)
    context = torch.randn(1, 7, 5 * 32)
    positions = torch.arange(12).unsqueeze(0)
    with torch.no_grad():
        assert torch.equal(drafter(block, context, positions), loaded(block, context, positions))


def test_missing_target_layer_ids_use_default_formula(tmp_path):
    target = make_target(layers=6)
    make_drafter(target, layers=2).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["dflash_config"]["target_layer_ids"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert DFlashDrafter.from_pretrained(tmp_path).target_layer_ids == [1, 3]


def test_bf16_checkpoint_loads_in_fp32(tmp_path):
    target = make_target()
    drafter = make_drafter(target)
    drafter.save_pretrained(tmp_path, dtype=torch.bfloat16)
    loaded = DFlashDrafter.from_pretrained(tmp_path, dtype=torch.float32)
    assert loaded.fc.weight.dtype == torch.float32
    assert torch.equal(loaded.fc.weight, drafter.fc.weight.to(torch.bfloat16).float())


def test_wrong_weight_names_are_reported(tmp_path):
    target = make_target()
    make_drafter(target).save_pretrained(tmp_path)
    from safetensors.torch import load_file, save_file

    state = load_file(str(tmp_path / "model.safetensors"))
    state["model.fc.weight"] = state.pop("fc.weight")
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing \['fc.weight'\], unexpected \['model.fc.weight'\]"):
        DFlashDrafter.from_pretrained(tmp_path)


def test_context_features_read_listed_layers():
    target = make_target(layers=3)
    drafter = make_drafter(target, layers=2)
    ids = torch.tensor([[5, 6, 7]])
    _, hidden = target_forward(target, ids, torch.arange(3).unsqueeze(0), new_cache(target))
    features = drafter.context_features(hidden)
    layer_ids = drafter.target_layer_ids
    expected = torch.cat([hidden[i + 1] for i in layer_ids], dim=-1)
    assert features.shape == (1, 3, 2 * 32) and torch.equal(features, expected)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": 48}, "hidden size: drafter 48 vs target 32"),
        ({"mask": 500}, "mask token id: drafter 500 vs target embedding rows 97"),
        ({"layers": [1, 7]}, r"target layer ids: drafter reads \[1, 7\], target has 3 layers"),
    ],
)
def test_incompatible_drafter_fails_at_load_time(tmp_path, change, message):
    target = make_target()
    donor = make_target(hidden=change.get("hidden", 32))
    drafter = make_drafter(donor, mask_token_id=change.get("mask"))
    if "layers" in change:
        drafter.config.dflash_config["target_layer_ids"] = change["layers"]
        drafter = DFlashDrafter(drafter.config)
    drafter.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):
        load_drafter(str(tmp_path), target)
    with pytest.raises(ValueError, match="drafter does not fit the target"):
        check_compatible(DFlashDrafter.from_pretrained(tmp_path), target)


def test_loads_a_checkpoint_shaped_like_the_published_one(tmp_path):
    """config.json as z-lab ships it (auto_map, rope_theta, model_type qwen3) + bf16 weights, no remote
    code."""
    from safetensors.torch import save_file

    target = make_target(layers=6)
    donor = make_drafter(target, layers=2)
    config = {
        "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3", "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
        "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "num_hidden_layers": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 97,
        "use_sliding_window": False, "block_size": 16, "num_target_layers": 6,
        "dflash_config": {"mask_token_id": 96, "target_layer_ids": [1, 3]},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in donor.state_dict().items()},
              str(tmp_path / "model.safetensors"))
    drafter = load_drafter(str(tmp_path), target, dtype="float32")
    assert drafter.block_size == 16 and drafter.target_layer_ids == [1, 3] and drafter.mask_token_id == 96
    expected = 1.0 / (1e6 ** (torch.arange(0, 8, 2).float() / 8))  # rope_theta 1e6, head_dim 8
    assert torch.allclose(drafter.rotary_emb.inv_freq.float(), expected)
    from specpolicy.decoding import SpeculativeDecoder

    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=12)
    assert decoder.generate([5, 6, 7], 16).output_ids == decoder.generate([5, 6, 7], 1).output_ids


def test_rotary_buffers_stay_float32_in_bf16_like_the_reference(tmp_path):
    drafter = make_drafter(make_target())
    drafter.save_pretrained(tmp_path / "d")
    reference = DFlashDrafter.from_pretrained(tmp_path / "d", dtype=torch.float32).rotary_emb.inv_freq
    loaded = DFlashDrafter.from_pretrained(tmp_path / "d", dtype=torch.bfloat16)
    assert loaded.fc.weight.dtype == torch.bfloat16
    assert loaded.rotary_emb.inv_freq.dtype == torch.float32
    assert torch.equal(loaded.rotary_emb.inv_freq, reference)  # bf16 inv_freq rounds the angles: drafts drift


def test_a_saved_drafter_states_its_rope_base_where_transformers_4_reads_it(tmp_path):
    """save_pretrained once wrote RoPE only as rope_parameters: a 4.x reader then used theta 10000."""
    drafter = make_drafter(make_target(layers=6), layers=2)
    drafter.config.rope_parameters = {"rope_type": "default", "rope_theta": 1_000_000.0}
    drafter.save_pretrained(tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_theta"] == 1_000_000.0 and config["rope_scaling"] is None  # what a 4.x config reads
    assert config["rope_parameters"]["rope_theta"] == 1_000_000.0
    reloaded = DFlashDrafter.from_pretrained(tmp_path / "out")
    assert reloaded.config.rope_parameters["rope_theta"] == 1_000_000.0


def test_a_scaled_rope_is_written_as_rope_scaling_too(tmp_path):
    drafter = make_drafter(make_target(layers=6), layers=2)
    drafter.config.rope_parameters = {"rope_type": "linear", "rope_theta": 500_000.0, "factor": 2.0}
    drafter.save_pretrained(tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_theta"] == 500_000.0
    assert config["rope_scaling"] == {"rope_type": "linear", "factor": 2.0}
