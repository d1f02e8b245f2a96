"""Model fingerprints follow the weights, not the name."""

from __future__ import annotations

import torch

from specpolicy.models.sources import weights_fingerprint
from zoo_build.random_models import make_target


def test_weights_fingerprint_changes_with_the_weights(tmp_path):
    target = make_target()
    target.save_pretrained(tmp_path / "m")
    first = weights_fingerprint(str(tmp_path / "m"), "target")
    assert first == weights_fingerprint(str(tmp_path / "m"), "target") and len(first) == 16
    with torch.no_grad():
        target.model.norm.weight.add_(1e-3)
    target.save_pretrained(tmp_path / "m")
    assert weights_fingerprint(str(tmp_path / "m"), "target") != first


def test_hub_ids_have_no_file_fingerprint():
    assert weights_fingerprint("someone/some-model", "target") is None
