"""Steps that rebuild the zoo from scratch (``python -m zoo_build train``) and publish it into the package."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specpolicy.zoo import DRAFTER_DIR, PUBLISH_JOURNAL, SHIPPED_DTYPE, TARGET_DIR, finish_publish


def build_tokenizer(run_dir: Path) -> None:
    """Train the byte-level BPE on the training split and cache the token streams."""
    from specpolicy.data.sharegpt import load_split
    from zoo_build.corpus import token_stream
    from zoo_build.tokenizer import train_tokenizer

    train = load_split("train")
    tokenizer = train_tokenizer((text for c in train for _, text in c.turns), run_dir / "tokenizer", 4096)
    token_stream(tokenizer, train, run_dir / "cache" / "train_tokens.npy")
    token_stream(tokenizer, load_split("validation"), run_dir / "cache" / "validation_tokens.npy")


def store_weights_as(folder: Path, dtype: torch.dtype) -> None:
    """Rewrite ``folder``'s safetensors and config in ``dtype`` (loading in float32 upcasts exactly)."""
    weights = folder / "model.safetensors"
    tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights), metadata={"format": "pt"})
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text())
    config["dtype"] = str(dtype).removeprefix("torch.")
    config.pop("torch_dtype", None)
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True))


def publish(run_dir: Path, dtype: str = SHIPPED_DTYPE, target_dir: Path = TARGET_DIR,
            drafter_dir: Path = DRAFTER_DIR) -> None:
    """Replace the installed zoo's target (with tokenizer) and drafter by a finished run's, stored in
    ``dtype``.

    Both are staged next to their destination; a journal then commits the publish and renames swap them
    in. Interrupted before the journal, the installed zoo is as it was; after it, the next publish or
    load of the zoo completes the swap (:func:`finish_publish`), so the zoo is never left without a model
    or with a new target beside an old drafter. Every number in the model card, the shipped sweep and
    the shipped predictor must be measured on these stored weights (rerun them after publishing).
    """
    pairs = ((run_dir / "target", target_dir), (run_dir / "drafter", drafter_dir))
    missing = [str(source) for source, _ in pairs if not (source / "config.json").exists()]
    if missing:
        raise FileNotFoundError(f"nothing to publish: {', '.join(missing)} not trained yet; run "
                                f"`python -m zoo_build train all --run-dir {run_dir}` first")
    zoo_dir = target_dir.parent
    finish_publish(zoo_dir)
    staged = []
    for source, dest in pairs:
        stage = dest.with_name(dest.name + ".staged")
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(source, stage)
        store_weights_as(stage, getattr(torch, dtype))
        staged.append([stage.name, str(dest.relative_to(zoo_dir))])
    (zoo_dir / PUBLISH_JOURNAL).write_text(json.dumps(staged))
    finish_publish(zoo_dir)


def run_step(name: str, run_dir: Path, *, target_steps: int, drafter_steps: int, threads: int,
             bf16: bool = True) -> None:
    """Run one step (``tokenizer``, ``target`` or ``drafter``) and record its wall time."""
    before = {"target": "tokenizer", "drafter": "target"}.get(name)
    if before and not (run_dir / before).is_dir():
        raise FileNotFoundError(f"`train {name}` reads the {before} step's output, and {run_dir / before} is "
                                f"missing; "
                                f"run `python -m zoo_build train {before} --run-dir {run_dir}` first (or "
                                f"`all`)")
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if name == "tokenizer":
        build_tokenizer(run_dir)
    elif name == "target":
        from zoo_build.train_target import TargetTrainArgs, main

        main(TargetTrainArgs(run_dir=run_dir, total_steps=target_steps, threads=threads, bf16=bf16))
    elif name == "drafter":
        from zoo_build.train_drafter import DrafterTrainArgs, main

        main(DrafterTrainArgs(run_dir=run_dir, total_steps=drafter_steps, threads=threads, bf16=bf16))
    timings_file = run_dir / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    timings[name] = timings.get(name, 0.0) + round(time.time() - start, 1)
    timings_file.write_text(json.dumps(timings, indent=2))
