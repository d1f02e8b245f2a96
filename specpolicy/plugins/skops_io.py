"""Saving and loading scikit-learn models with skops (never pickle), trusting only known types."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from specpolicy.files import atomic_path, write_text

SAFE_PREFIXES = ("sklearn.", "numpy.", "builtins.", "scipy.")
SAFE_FUNCTIONS = {"specpolicy.features.compact_from_augmented", "specpolicy.features.logits_from_augmented"}


class _NoTorch:
    """A finder that refuses ``torch`` (an ImportError, which the package walk skips)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not needed to read scikit-learn models")


def skops_io() -> ModuleType:
    """``skops.io``, imported without torch: its import walks every scikit-learn module, and
    ``sklearn.externals.array_api_compat.torch`` imports torch where it is installed (6-8 s), which no
    scikit-learn model here needs. Once torch is loaded anyway, a plain import."""
    if "skops.io" in sys.modules or "torch" in sys.modules:
        return importlib.import_module("skops.io")
    blocker = _NoTorch()
    sys.meta_path.insert(0, blocker)
    try:
        return importlib.import_module("skops.io")
    finally:
        sys.meta_path.remove(blocker)
        for name in [m for m in sys.modules if m.startswith("sklearn.externals.array_api_compat.torch")]:
            del sys.modules[name]  # half-imported under the blocker: a later array-API lookup imports it afresh


def dump(model: object, file: str | Path) -> None:
    sio = skops_io()
    sio.dump(model, Path(file))


def safe_load(file: str | Path) -> object:
    """Load a skops file whose types are all scikit-learn, numpy, scipy or this project's feature functions."""
    sio = skops_io()

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
    with atomic_path(folder / MODEL_NAME) as tmp:
        dump(model, tmp)
    write_text(folder / settings_name, json.dumps(settings))


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
