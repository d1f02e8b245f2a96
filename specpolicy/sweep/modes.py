"""How a sweep records a prompt (a light module: the CLI imports it for its options)."""

from __future__ import annotations

from enum import Enum


class SweepMode(str, Enum):
    """``replay``: one decode and exact counterfactuals; ``live``: decode every block size (measured time)."""

    replay = "replay"
    live = "live"


class Executor(str, Enum):
    """Where a sweep runs: in this process, or sharded over Ray workers."""

    local = "local"
    ray = "ray"
