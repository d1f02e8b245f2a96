"""``python -m benchmarks twin``: a twin built from the test zoo decodes the stored sweep's outputs and
cycles."""

from __future__ import annotations

from benchmarks.twin import bench_twin
from specpolicy.models.twin import TwinShape, build_twin


def test_a_twin_of_the_pair_that_swept_matches_its_record_cycle_for_cycle(test_zoo, replay_store, tmp_path):
    twin = build_twin(*test_zoo, tmp_path / "twin", TwinShape(layers=5, heads=8, intermediate=128))
    result = bench_twin(list(replay_store.records()), str(twin / "target"), str(twin / "drafter"), (4, 8))
    assert result.prompts == len(list(replay_store.records())) and result.cycles > result.prompts
    assert result.outputs_differ == result.cycles_differ == []


def test_a_pair_that_did_not_sweep_is_told_apart(test_zoo, replay_store, tmp_path):
    """The check can fail: a twin whose MLP units all write (random down projections) decodes otherwise."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    twin = build_twin(*test_zoo, tmp_path / "twin", TwinShape(layers=3, heads=4, intermediate=128))
    weights = load_file(twin / "target" / "model.safetensors")
    for name in [n for n in weights if n.endswith("mlp.down_proj.weight")]:
        weights[name] = torch.randn_like(weights[name])
    save_file(weights, twin / "target" / "model.safetensors")
    assert json.loads((twin / "target" / "config.json").read_text())["intermediate_size"] == 128
    result = bench_twin(list(replay_store.records()), str(twin / "target"), str(twin / "drafter"), (4,))
    assert result.outputs_differ and result.first_differences[0].startswith(result.outputs_differ[0])
