"""The transformers versions whose ``generate()`` runs DFlash, checked before anything is built."""

from __future__ import annotations

from importlib.metadata import version

from packaging.version import Version

DFLASH_MIN_TRANSFORMERS = "5.15.0"
"""The first release with ``speculation_type="dflash"`` and ``MuseGlimmerAssistantModel``."""


def require_dflash_support() -> None:
    """A RuntimeError naming the fix when the installed transformers has no DFlash ``generate()``."""
    installed = version("transformers")
    if Version(installed) < Version(DFLASH_MIN_TRANSFORMERS):
        raise RuntimeError(f"transformers {installed} has no DFlash generate(); specpolicy.hf needs "
                           f"transformers>={DFLASH_MIN_TRANSFORMERS} (pip install 'transformers>="
                           f"{DFLASH_MIN_TRANSFORMERS}'); the rest of specpolicy works on {installed}")
