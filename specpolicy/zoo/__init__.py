"""The built-in tiny zoo: a Qwen3 target and its DFlash drafter, trained by this project (``zoo_build``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from specpolicy.defaults import MEASURED_DIR as MEASURED_DIR  # GPU tables, defined where --costs finds them

ZOO_DIR = Path(__file__).parent / "tiny"
TARGET_DIR = ZOO_DIR / "target"
DRAFTER_DIR = ZOO_DIR / "drafter"
SHIPPED_DTYPE = "bfloat16"
"""dtype the zoo's weights are stored in (half the size of float32; loading in float32 upcasts exactly).
The drafter trains against the target rounded to it, and the shipped sweep, predictor and card are
measured on the rounded weights."""
PUBLISH_JOURNAL = ".publishing.json"
"""written by ``python -m zoo_build publish`` once all is staged: its commit point, removed when done"""


def finish_publish(zoo_dir: Path) -> None:
    """Complete a committed publish in ``zoo_dir`` (renames only, safe to repeat); none without a journal."""
    journal = zoo_dir / PUBLISH_JOURNAL
    if not journal.exists():
        return
    swaps = [(zoo_dir / stage, zoo_dir / dest) for stage, dest in json.loads(journal.read_text())]
    for stage, dest in swaps:
        if stage.exists():  # not swapped in yet (an interrupt may have moved the old one aside already)
            old = dest.with_name(dest.name + ".old")
            if dest.exists():
                shutil.rmtree(old, ignore_errors=True)
                dest.rename(old)
            stage.rename(dest)
    for _, dest in swaps:
        shutil.rmtree(dest.with_name(dest.name + ".old"), ignore_errors=True)
    journal.unlink()
