"""What a sweep store's settings must match to be resumed."""

from __future__ import annotations

MATCHING_KEYS = ("candidates", "temperature", "max_new_tokens", "seed", "target", "drafter", "dataset", "mode",
                 "max_prompt_tokens", "dtype", "device", "reference_block_size")
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
    diffs += [f"{k}: stored {existing.get(k, v)!r} vs requested {meta.get(k, v)!r}" for k, v in VERIFY_KEYS.items()
              if existing.get(k, v) != meta.get(k, v)]
    stored_models, models = existing.get("models", {}), meta.get("models")
    if models is not None:
        diffs += [f"{k}: stored {stored_models.get(k)} vs loaded {models.get(k)}"
                  + (" (other weights under the same name)" if k.endswith("fingerprint") else "")
                  for k in MODEL_KEYS if k in stored_models and stored_models.get(k) != models.get(k)]
    return diffs

