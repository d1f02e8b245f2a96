"""What a sweep store's folder and settings must be to be created or resumed."""

from __future__ import annotations

import json
from pathlib import Path

from specpolicy.files import check_folder_path

MATCHING_KEYS = ("candidates", "temperature", "max_new_tokens", "seed", "target", "drafter", "dataset",
                 "mode", "max_prompt_tokens", "dtype", "device", "reference_block_size", "requests", "tokens")
"""settings that change results: a resume must match every one the store holds"""
NEW_MATCHING_KEYS = ("dataset_sha256",)
"""identity added later: compared when the store holds it (older stores lack it)"""
VERIFY_KEYS = {"verify_lengths": False, "confidence_sizes": []}
"""what a replay recorded for verify lengths: absent means the default, on either side"""
MODEL_KEYS = ("target_fingerprint", "drafter_fingerprint", "dtype", "device")


def settings_diffs(existing: dict, meta: dict) -> list[str]:
    """The settings in which ``meta`` differs from a store's ``existing`` metadata, one line each."""
    keys = [*MATCHING_KEYS, *(k for k in NEW_MATCHING_KEYS if k in existing)]
    diffs = [f"{k}: stored {existing.get(k)!r} vs requested {meta.get(k)!r}" for k in keys
             if k in meta and existing.get(k) != meta.get(k)]
    diffs += [f"{k}: stored {existing.get(k, v)!r} vs requested {meta.get(k, v)!r}"
              for k, v in VERIFY_KEYS.items() if existing.get(k, v) != meta.get(k, v)]
    stored_models, models = existing.get("models", {}), meta.get("models")
    if models is not None:
        diffs += [f"{k}: stored {stored_models.get(k)} vs loaded {models.get(k)}"
                  + (" (other weights under the same name)" if k.endswith("fingerprint") else "")
                  for k in MODEL_KEYS if k in stored_models and stored_models.get(k) != models.get(k)]
    return diffs


class StoreUnusableError(ValueError):
    """The folder cannot hold this sweep (a file, other content or settings): another folder, or the same."""


BEFORE_META = {".lock", "features", "meta.tmp", "meta.json.tmp"}
"""what :meth:`~specpolicy.sweep.store.SweepStore.open` writes before meta.json (all a kill leaves)"""


def check_resumable(path: str | Path, meta: dict) -> None:
    """Fail, naming every differing setting, when ``path`` holds a sweep ``meta`` cannot resume (before models
    load; fingerprints are checked again by :meth:`~specpolicy.sweep.store.SweepStore.open`)."""
    try:
        path = check_folder_path(path, f"--out {path}", "pass a folder for the sweep store")
    except ValueError as error:
        raise StoreUnusableError(str(error)) from None
    meta_file = path / "meta.json"
    if not meta_file.exists():
        if path.is_dir() and any(p.name not in BEFORE_META for p in path.iterdir()):
            raise StoreUnusableError(f"{path} is a non-empty folder without meta.json; pass a new or empty "
                                     "--out folder")
        return  # new, empty, or a store killed before its meta.json was written: nothing recorded yet
    try:
        existing = json.loads(meta_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StoreUnusableError(f"{meta_file} is unreadable; pass a new --out folder") from None
    diffs = settings_diffs(existing, meta)
    if diffs:
        raise StoreUnusableError(f"{path} holds a sweep with other settings ({'; '.join(diffs)}); "
                                 "pass a new --out folder or the same settings to resume")
