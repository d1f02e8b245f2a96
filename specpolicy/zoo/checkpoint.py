"""Resumable training state (model, optimizer, RNGs, step, elapsed time) and the shared LR schedule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch


def cosine_lr(step: int, total: int, warmup: int, peak: float, floor: float = 0.0) -> float:
    """Linear warmup to ``peak``, then cosine decay to ``floor * peak`` at ``total``."""
    if step < warmup:
        return peak * (step + 1) / max(1, warmup)
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def save_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
               step: int, elapsed: float, generator: torch.Generator | None = None) -> None:
    """Write the training state atomically (a kill mid-write leaves the previous checkpoint intact)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": rng.bit_generator.state,
             "step": step, "elapsed": elapsed, "generator": generator.get_state() if generator is not None else None}
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def resume_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
                 generator: torch.Generator | None = None) -> tuple[int, float]:
    """Restore a checkpoint in place when ``path`` exists; returns (step, elapsed seconds)."""
    if not path.exists():
        return 0, 0.0
    state = torch.load(path, weights_only=False)  # our own checkpoint, never a downloaded file
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    rng.bit_generator.state = state["rng"]
    if generator is not None and state.get("generator") is not None:
        generator.set_state(state["generator"])
    print(f"resumed {path} at step {state['step']} ({state['elapsed'] / 60:.1f} min trained)", flush=True)
    return state["step"], state["elapsed"]
