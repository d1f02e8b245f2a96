"""Targets, the DFlash drafter and their loading; names load on first use (``sources`` stays torch-free)."""

from __future__ import annotations

import importlib

_PUBLIC = {"DFlashDrafter": "dflash", "default_target_layer_ids": "dflash_config", "ModelPair": "loading",
           "load_drafter": "loading", "load_pair": "loading", "load_target": "loading"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'specpolicy.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"specpolicy.models.{_PUBLIC[name]}"), name)
