"""Sizes and folders shared by the tutorial scripts (the test suite shrinks them through the environment)."""

import os
from pathlib import Path

SAMPLES = int(os.environ.get("SPECPOLICY_TUTORIAL_SAMPLES", "48"))
WORKDIR = Path(os.environ.get("SPECPOLICY_TUTORIAL_DIR", "runs/tutorials"))
WORKDIR.mkdir(parents=True, exist_ok=True)
