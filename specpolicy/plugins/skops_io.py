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


MODEL_NAME = "model.skops"


def save_model(folder: str | Path, model: object, settings_name: str, settings: dict) -> None:
    """A learned policy's folder: the scikit-learn ``model`` (``model.skops``) and its ``settings`` (JSON)."""
    import json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dump(model, folder / MODEL_NAME)
    (folder / settings_name).write_text(json.dumps(settings))


def load_model(folder: str | Path, settings_name: str, what: str, train_command: str) -> tuple[object, dict]:
    """(model, settings) saved by :func:`save_model`; a missing file names itself and ``train_command``, a damaged
    settings file says so, and the model loads through :func:`safe_load`. ``what``: the policy, for messages."""
    import json

    folder = Path(folder)
    for name in (MODEL_NAME, settings_name):
        if not (folder / name).exists():
            raise FileNotFoundError(f"{what} file {folder / name} is missing; train one with `{train_command}`")
    try:
        settings = json.loads((folder / settings_name).read_text())
    except Exception as exc:
        raise ValueError(f"{what} in {folder} is corrupted ({type(exc).__name__}: {exc})") from None
    return safe_load(folder / MODEL_NAME), settings
