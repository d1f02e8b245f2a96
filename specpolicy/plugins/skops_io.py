"""Saving and loading scikit-learn models with skops (never pickle), trusting only known types; an MLP that a
policy runs in numpy can be kept as its weight arrays instead (read without importing scikit-learn)."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from specpolicy.files import atomic_path, write_text

SAFE_PREFIXES = ("sklearn.", "numpy.", "builtins.", "scipy.")
SAFE_FUNCTIONS = {"specpolicy.features.compact_from_augmented", "specpolicy.features.logits_from_augmented"}


class _NoTorch:
    """A finder that refuses ``torch`` (an ImportError, which the package walk skips)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not needed to read scikit-learn models")


def skops_io() -> ModuleType:
    """``skops.io`` imported without torch (sklearn's array-API module imports it where installed, 6-8 s, and
    no model here needs it); a plain import once torch is loaded."""
    if "skops.io" in sys.modules or "torch" in sys.modules:
        return importlib.import_module("skops.io")
    blocker = _NoTorch()
    sys.meta_path.insert(0, blocker)
    try:
        return importlib.import_module("skops.io")
    finally:
        sys.meta_path.remove(blocker)
        for name in [m for m in sys.modules if m.startswith("sklearn.externals.array_api_compat.torch")]:
            # half-imported under the blocker: a later array-API lookup imports it afresh
            del sys.modules[name]


def safe_load(file: str | Path) -> object:
    """Load a skops file whose types are all scikit-learn, numpy, scipy or this project's features."""
    sio, file = skops_io(), Path(file)
    if not file.exists():
        raise FileNotFoundError(f"{file} is missing; train the policy with `specpolicy train ... --out "
                                f"{file.parent}`")
    try:
        untrusted = sio.get_untrusted_types(file=file)
    except Exception as exc:
        raise ValueError(f"{file} is corrupted ({type(exc).__name__}: {exc}); retrain it") from None
    unsafe = [t for t in untrusted if not t.startswith(SAFE_PREFIXES) and t not in SAFE_FUNCTIONS]
    if unsafe:
        raise ValueError(f"refusing to load {file}: it contains untrusted types {unsafe}")
    return sio.load(file, trusted=untrusted)


MODEL_NAME = "model.skops"
WEIGHTS_NAME = "model.safetensors"


@dataclass
class MLPWeights:
    """A scikit-learn MLP's layers as arrays, ``coefs_`` [in, out] and ``intercepts_`` [out] per layer: all a
    policy that runs the network in numpy reads, loaded without scikit-learn (importing skops takes 4 s)."""

    coefs_: list[np.ndarray]
    intercepts_: list[np.ndarray]


def save_model(folder: str | Path, model: object, settings_name: str, settings: dict,
               weights_only: bool = False ) -> None:
    """A learned policy's folder: the scikit-learn ``model`` (``model.skops``; with ``weights_only``, an MLP's
    layers in ``model.safetensors``) and its ``settings`` (JSON)."""
    import json

    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / (WEIGHTS_NAME if weights_only else MODEL_NAME)) as tmp:
        if weights_only:
            layers = {f"{kind}.{i}": np.ascontiguousarray(array) for kind in ("coefs", "intercepts")
                      for i, array in enumerate(getattr(model, f"{kind}_"))}
            save_file(layers, str(tmp))
        else:
            skops_io().dump(model, Path(tmp))
    write_text(folder / settings_name, json.dumps(settings))


def load_model(folder: str | Path, settings_name: str, what: str, train_command: str,
               weights_only: bool = False ) -> tuple[object, dict]:
    """(model, settings) saved by :func:`save_model`; a missing or damaged file says so, naming it."""
    import json

    folder = Path(folder)
    saved_weights = (folder / WEIGHTS_NAME).exists() or (weights_only and not (folder / MODEL_NAME).exists())
    for name in (WEIGHTS_NAME if saved_weights else MODEL_NAME, settings_name):
        if not (folder / name).exists():
            raise FileNotFoundError(f"{what} file {folder / name} is missing; train one with "
                                    f"`{train_command}`")
    try:
        settings = json.loads((folder / settings_name).read_text())
        weights = _read_weights(folder / WEIGHTS_NAME) if saved_weights else None
    except Exception as exc:
        raise ValueError(f"{what} in {folder} is corrupted ({type(exc).__name__}: {exc})") from None
    return (weights if saved_weights else safe_load(folder / MODEL_NAME)), settings


def _read_weights(file: Path) -> MLPWeights:
    from safetensors.numpy import load_file

    layers = load_file(str(file))
    depth = len(layers) // 2
    weights = MLPWeights([layers[f"coefs.{i}"] for i in range(depth)],
                         [layers[f"intercepts.{i}"] for i in range(depth)])
    check_finite(layers, file)
    return weights


def check_finite(arrays: dict[str, np.ndarray], where: Path) -> None:
    """Refuse weights holding NaN or infinite values, naming the arrays (every learned policy's weights)."""
    broken = sorted(name for name, array in arrays.items() if not np.isfinite(array).all())
    if broken:
        raise ValueError(f"the weights in {where} hold NaN or infinite values ({', '.join(broken[:4])}): the "
                         "training diverged; retrain it (e.g. with a lower --lr)")
