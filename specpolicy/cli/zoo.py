"""``specpolicy zoo ...``: rebuild and inspect the built-in tiny model pair."""

from __future__ import annotations

from pathlib import Path

import typer

from specpolicy.defaults import CARD_PROMPTS, ZOO_DRAFTER_STEPS, ZOO_TARGET_STEPS, ZOO_THREADS

app = typer.Typer(help="The built-in tiny target and DFlash drafter.", no_args_is_help=True)


@app.command("train")
def train(
    step: str = typer.Argument("all", help="tokenizer, target, drafter, or all (in that order)"),
    run_dir: Path = typer.Option(Path("runs/zoo"), help="checkpoints, caches and logs; rerun to resume"),
    target_steps: int = typer.Option(ZOO_TARGET_STEPS, min=1, help="optimizer steps of the target's schedule"),
    drafter_steps: int = typer.Option(ZOO_DRAFTER_STEPS, min=1, help="optimizer steps of the drafter's schedule"),
    threads: int = typer.Option(ZOO_THREADS, min=1, help="torch CPU threads"),
    bf16: bool = typer.Option(True, "--bf16/--fp32", help="bfloat16 autocast while training (weights stay fp32)"),
) -> None:
    """Rebuild tokenizer, target and drafter from scratch with fixed seeds (resumable) in RUN_DIR.

    Nothing is written into the installed package: `specpolicy zoo publish` swaps a finished run in."""
    from specpolicy.zoo import build

    steps = ["tokenizer", "target", "drafter"] if step == "all" else [step]
    unknown = [s for s in steps if s not in ("tokenizer", "target", "drafter")]
    if unknown:
        raise typer.BadParameter(f"unknown step {unknown[0]!r}; use tokenizer, target, drafter or all")
    for name in steps:
        build.run_step(name, run_dir, target_steps=target_steps, drafter_steps=drafter_steps, threads=threads,
                       bf16=bf16)


@app.command("publish")
def publish(
    run_dir: Path = typer.Option(Path("runs/zoo"), help="a finished `zoo train` run"),
) -> None:
    """Replace the installed zoo's target and drafter by a finished run's (atomic; training never writes there)."""
    from specpolicy.zoo import ZOO_DIR, build

    build.publish(run_dir)
    typer.echo(f"published {run_dir}/target and {run_dir}/drafter into {ZOO_DIR}; rebuild the shipped sweeps, "
               "predictors and card on them")


@app.command("info")
def info() -> None:
    """Where the shipped zoo lives and what it contains."""
    from specpolicy.zoo import ZOO_DIR

    for path in sorted(ZOO_DIR.rglob("*")):
        if path.is_file():
            typer.echo(f"{path.relative_to(ZOO_DIR)}\t{path.stat().st_size / 1e6:.2f} MB")


@app.command("card")
def card(
    run_dir: Path = typer.Option(Path("runs/zoo"), help="the zoo's training run (summaries, timings)"),
    prompts: int = typer.Option(CARD_PROMPTS, min=1, help="prompts per dataset and temperature"),
    out: Path = typer.Option(None, help="where to write the card (default: next to the shipped weights)"),
) -> None:
    """Measure the shipped zoo (tau per block size, per-prompt optimum, speed) and write its model card."""
    import json

    from specpolicy.zoo import ZOO_DIR
    from specpolicy.zoo.card import measure, render

    if run_dir.exists() and not run_dir.is_dir():
        raise typer.BadParameter(f"{run_dir} is a file; pass the folder of a `specpolicy zoo train` run",
                                 param_hint="--run-dir")
    result = measure(run_dir, prompts)
    (run_dir / "card.json").write_text(json.dumps(result, indent=2))
    path = out or ZOO_DIR / "MODEL_CARD.md"
    path.write_text(render(result))
    typer.echo(f"model card written to {path}")
