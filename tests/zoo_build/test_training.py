"""Zoo training resumes exactly after an interruption; the shipped zoo loads and fits together."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from zoo_build import train_target
from zoo_build.tokenizer import train_tokenizer


def tiny_run(run: Path) -> train_target.TargetTrainArgs:
    tokenizer = train_tokenizer(["hello world, this is a tiny corpus"] * 10, run / "tokenizer",
                                vocab_size=280)
    rng = np.random.default_rng(0)
    (run / "cache").mkdir(parents=True)
    for name in ("train_tokens", "validation_tokens"):
        np.save(run / "cache" / f"{name}.npy", rng.integers(0, len(tokenizer), 500).astype(np.uint16))
    return train_target.TargetTrainArgs(run_dir=run, hidden_size=32, num_layers=1, num_heads=2,
                                        num_kv_heads=1,
                                        intermediate_size=64, seq_len=16, batch_size=2, total_steps=4,
                                        checkpoint_every=2, eval_every=100, threads=1)


@pytest.mark.slow
def test_target_training_resumes_exactly(tmp_path, monkeypatch):
    straight = train_target.main(tiny_run(tmp_path / "a"))
    args = tiny_run(tmp_path / "b")
    calls = {"n": 0}
    real = train_target.sample_windows

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(train_target, "sample_windows", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_target.main(args)
    monkeypatch.setattr(train_target, "sample_windows", real)
    resumed = train_target.main(args)
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_shipped_zoo_loads_and_decodes():
    from specpolicy.data.prompts import Prompt, encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    pair = load_pair("tiny", "tiny")
    assert pair.drafter.mask_token_id == pair.tokenizer.convert_tokens_to_ids("<|MASK|>")
    ids = encode_prompt(pair.tokenizer, Prompt.single("t", "How do I sort a list in Python?"))
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=32)
    assert decoder.generate(ids, 16).output_ids == decoder.generate(ids, 1).output_ids


def test_shipped_sweep_was_recorded_on_the_shipped_weights():
    import json

    from specpolicy.models.sources import weights_fingerprint
    from specpolicy.zoo import ZOO_DIR

    models = json.loads((ZOO_DIR / "sweeps" / "sharegpt" / "meta.json").read_text())["models"]
    assert models["target_fingerprint"] == weights_fingerprint("tiny", "target"), "rebuild the shipped sweep"
    assert models["drafter_fingerprint"] == weights_fingerprint("tiny",
                                                                "drafter"), "rebuild the shipped sweep"
