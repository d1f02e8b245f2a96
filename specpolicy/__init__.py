"""specpolicy: learn and compare block-size policies for DFlash speculative decoding.

Importing the package registers the Gymnasium environments ``specpolicy/BlockSize-v0``,
``specpolicy/BlockSizeLive-v0`` and ``specpolicy/BlockSizeStep-v0``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from specpolicy import envs as _envs  # noqa: F401  (registers the Gymnasium IDs)
