"""The cost twin computes the tiny pair's function: the same outputs and acceptance, cycle for cycle, in a
larger network whose added parts write through zero output projections."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.models import load_pair
from specpolicy.models.sources import resolve_source
from specpolicy.models.twin import TwinShape, build_twin

SMALL = TwinShape(layers=8, heads=8, intermediate=1024, seed=3)


@pytest.fixture(scope="module")
def twin(test_zoo, tmp_path_factory):
    return build_twin(*test_zoo, tmp_path_factory.mktemp("twin") / "pair", SMALL)


def test_the_twin_decodes_what_the_tiny_pair_decodes_cycle_for_cycle(test_zoo, twin):
    torch.set_num_threads(1)
    tiny = load_pair(str(test_zoo[0]), str(test_zoo[1]), "float32")
    big = load_pair(str(twin / "target"), str(twin / "drafter"), "float32")
    assert big.target.num_parameters() > 2 * tiny.target.num_parameters()
    small_decoder = SpeculativeDecoder(tiny.target, tiny.drafter, max_new_tokens=40)
    big_decoder = SpeculativeDecoder(big.target, big.drafter, max_new_tokens=40)
    for text in ("The capital of France is", "def add(a, b):", "Write a poem about the sea."):
        ids = tiny.tokenizer(text)["input_ids"]
        for block_size in (4, 16):
            expected, got = small_decoder.generate(ids, block_size), big_decoder.generate(ids, block_size)
            assert got.output_ids == expected.output_ids
            assert [c.accepted for c in got.cycles] == [c.accepted for c in expected.cycles]


def test_added_heads_units_and_layers_write_nothing(test_zoo, twin):
    state = load_file(twin / "target" / "model.safetensors")
    original = load_file(test_zoo[0] / "model.safetensors")
    config = json.loads((twin / "target" / "config.json").read_text())
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"],
            config["intermediate_size"]) == (8, 8, 4, 1024)
    for name, tensor in original.items():  # every tiny weight sits unchanged in the twin's first rows
        corner = tuple(slice(0, size) for size in tensor.shape)
        assert torch.equal(state[name][corner], tensor), name
    tiny = json.loads((test_zoo[0] / "config.json").read_text())
    heads_width = tiny["num_attention_heads"] * tiny["head_dim"]
    for layer in range(8):
        weights = [state[f"model.layers.{layer}.{n}.weight"] for n in ("self_attn.o_proj", "mlp.down_proj")]
        old = layer < tiny["num_hidden_layers"]  # the tiny target's heads and units write; nothing else
        assert not weights[0][:, heads_width * old:].any()
        assert not weights[1][:, tiny["intermediate_size"] * old:].any()
        assert state[f"model.layers.{layer}.mlp.up_proj.weight"][tiny["intermediate_size"]:].any()  # works
    drafter, tiny = (json.loads((f / "config.json").read_text()) for f in (twin / "drafter", test_zoo[1]))
    assert drafter["num_target_layers"] == 8 and drafter["dflash_config"] == tiny["dflash_config"]


def test_a_shape_that_cannot_hold_the_tiny_target_is_refused(test_zoo, tmp_path):
    with pytest.raises(ValueError, match="layers 2 < the tiny target's 3; heads 5 is not a multiple of 2"):
        build_twin(*test_zoo, tmp_path / "t", TwinShape(layers=2, heads=5))
    assert not (tmp_path / "t").exists()


def test_an_unbuilt_twin_names_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="specpolicy zoo twin"):
        resolve_source("twin", "target")


def test_a_folder_that_is_not_a_twin_is_never_replaced(test_zoo, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an earlier output"):
        build_twin(*test_zoo, tmp_path, SMALL)
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_the_shipped_twin_tables_hold_the_figures_the_docs_publish():
    """docs/cost-twin.md's costs of the twin are the shipped tables' (a test per published number)."""
    from pathlib import Path

    from specpolicy.costs import CostTable

    page = " ".join((Path(__file__).parents[2] / "docs" / "cost-twin.md").read_text().split())
    for name in ("twin-cpu-llamacpp", "twin-cpu-llamacpp-1-16", "twin-cpu-torch"):
        table = CostTable.load(name)
        draft, verify = table.draft_seconds[16], table.verify_seconds[16]
        row = (f"| {1e3 * table.ar_seconds:.1f} ms | {1e3 * draft:.2f} ms ({draft / verify:.2f} of the "
               f"verify) | {1e3 * verify:.1f} ms | {table.in_ar_steps(16):.2f} plain steps | "
               f"{table.in_ar_steps(2):.2f} plain steps |")
        assert row in page, name
        assert table.source and "cost twin" in table.source
