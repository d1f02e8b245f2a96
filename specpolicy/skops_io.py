"""Saving and loading scikit-learn models with skops (never pickle), trusting only known types."""

from __future__ import annotations

from pathlib import Path

SAFE_PREFIXES = ("sklearn.", "numpy.", "builtins.", "scipy.")
SAFE_FUNCTIONS = {"specpolicy.features.compact_from_augmented", "specpolicy.features.logits_from_augmented"}


def dump(model: object, file: str | Path) -> None:
    import skops.io as sio

    sio.dump(model, Path(file))


def safe_load(file: str | Path) -> object:
    """Load a skops file whose types are all scikit-learn, numpy, scipy or this project's feature functions."""
    import skops.io as sio

    file = Path(file)
    if not file.exists():
        raise FileNotFoundError(f"{file} is missing; train the policy with `specpolicy train ... --out {file.parent}`")
    try:
        untrusted = sio.get_untrusted_types(file=file)
    except Exception as exc:
        raise ValueError(f"{file} is corrupted ({type(exc).__name__}: {exc}); retrain it") from None
    unsafe = [t for t in untrusted if not t.startswith(SAFE_PREFIXES) and t not in SAFE_FUNCTIONS]
    if unsafe:
        raise ValueError(f"refusing to load {file}: it contains untrusted types {unsafe}")
    return sio.load(file, trusted=untrusted)
