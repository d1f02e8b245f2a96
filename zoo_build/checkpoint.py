"""The zoo's shared training loop: resumable state (model, optimizer, RNGs, step, elapsed time), LR
schedule."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from specpolicy.files import atomic_path


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
             "step": step, "elapsed": elapsed,
             "generator": generator.get_state() if generator is not None else None}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def resume_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 rng: np.random.Generator,
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


@dataclass
class Loop:
    """What a zoo training run shares: the schedule, checkpointing and logging of one optimizer loop."""

    total_steps: int
    checkpoint_every: int
    lr_at: Callable[[int], float]
    state_file: Path
    log_file: Path
    bf16: bool = True


def train_loop(loop: Loop, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rng: np.random.Generator,
               loss_fn: Callable[[], tuple[torch.Tensor, dict]], generator: torch.Generator | None = None,
               on_step: Callable[[int, dict], None] | None = None) -> tuple[int, float]:
    """Resume from ``loop.state_file`` and train to ``loop.total_steps``; returns (steps, seconds trained).

    ``loss_fn()`` draws a batch and returns (loss, extra log fields); ``on_step(step, record)`` may add
    fields (e.g. a validation loss) before the record is logged. Checkpoints are atomic, so a kill
    at any point resumes where the last checkpoint left off.
    """
    step, elapsed = resume_state(loop.state_file, model, optimizer, rng, generator)
    model.train()
    t0 = time.time()
    with open(loop.log_file, "a") as log:
        while step < loop.total_steps:
            for group in optimizer.param_groups:
                group["lr"] = loop.lr_at(step)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=loop.bf16):
                loss, extra = loss_fn()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            record = {"step": step, "loss": round(loss.item(), 4), "lr": loop.lr_at(step - 1), **extra}
            if on_step is not None:
                on_step(step, record)
            if step % loop.checkpoint_every == 0 or step == loop.total_steps:
                record["elapsed_s"] = round(elapsed + time.time() - t0, 1)
                save_state(loop.state_file, model, optimizer, rng, step, elapsed + time.time() - t0,
                           generator)
            log.write(json.dumps(record) + "\n")
            log.flush()
            if step % 10 == 0:
                print(json.dumps(record), flush=True)
    return step, elapsed + time.time() - t0
