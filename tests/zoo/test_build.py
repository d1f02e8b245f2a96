"""Publishing the zoo stores weights in a smaller dtype that loads back exactly."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from specpolicy.models.testing import make_target
from specpolicy.zoo.build import store_weights_as


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
