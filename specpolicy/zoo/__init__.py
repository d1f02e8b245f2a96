"""The built-in tiny model zoo: a Qwen3 target and its DFlash drafter, trained by this project."""

from __future__ import annotations

from pathlib import Path

ZOO_DIR = Path(__file__).parent / "tiny"
TARGET_DIR = ZOO_DIR / "target"
DRAFTER_DIR = ZOO_DIR / "drafter"
SHIPPED_DTYPE = "float32"
"""dtype the zoo's weights are stored in; "bfloat16" halves the size (loading in float32 upcasts exactly),
but the shipped sweep, predictor and card must then be rebuilt on the rounded weights"""
