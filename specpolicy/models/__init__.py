"""Targets, the DFlash drafter, and loading of both (local folders, hub ids, the built-in zoo)."""

from __future__ import annotations

from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.dflash_config import default_target_layer_ids
from specpolicy.models.loading import ModelPair, load_drafter, load_pair, load_target

__all__ = ["DFlashDrafter", "ModelPair", "default_target_layer_ids", "load_drafter", "load_pair", "load_target"]
