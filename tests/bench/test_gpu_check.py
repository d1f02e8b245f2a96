"""The prepared GPU check: on CPU it runs the same comparisons (slow tier); on CUDA when a GPU is present."""

from __future__ import annotations

import pytest
import torch

from specpolicy.bench.gpu_check import gpu_check
from specpolicy.data.registry import load_prompts
from specpolicy.defaults import DATASET


def _assert_passes(device: str) -> None:
    checks = gpu_check(device, load_prompts(DATASET, 2, 0), max_new_tokens=16)
    failed = [c for c in checks if c.passed is False]
    assert not failed, failed
    assert {c.name.split(" ", 1)[1] for c in checks if c.passed} == {
        "float32 outputs = CPU", "float32 cycles = CPU", "replay = live"}


@pytest.mark.slow
def test_gpu_check_runs_its_comparisons_on_cpu():
    _assert_passes("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_shipped_pair_on_cuda_matches_cpu_float32():
    _assert_passes("cuda")
