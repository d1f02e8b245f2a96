"""specpolicy: learn and compare block-size policies for DFlash speculative decoding."""

from __future__ import annotations

__version__ = "0.1.0"
