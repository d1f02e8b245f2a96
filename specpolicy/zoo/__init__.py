"""The built-in tiny model zoo: a Qwen3 target and its DFlash drafter, trained by this project."""

from __future__ import annotations

from pathlib import Path

ZOO_DIR = Path(__file__).parent / "tiny"
TARGET_DIR = ZOO_DIR / "target"
DRAFTER_DIR = ZOO_DIR / "drafter"
SHIPPED_DTYPE = "bfloat16"
"""dtype the zoo's weights are stored in (half the size of float32; loading in float32 upcasts exactly).
The drafter trains against the target rounded to it, and the shipped sweep, predictor and card are
measured on the rounded weights."""
