"""``python -m zoo_build train|publish|card``: rebuild the shipped tiny pair and its model card
(maintainers)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zoo_build import CARD_PROMPTS, ZOO_DRAFTER_STEPS, ZOO_TARGET_STEPS, ZOO_THREADS

app = typer.Typer(help="Rebuild the shipped tiny target and DFlash drafter (run from a checkout).",
                  no_args_is_help=True, add_completion=False)
STEPS = ("tokenizer", "target", "drafter")


@app.command("train")
def train(
    step: str = typer.Argument("all", help="tokenizer, target, drafter, or all (in that order)"),
    run_dir: Path = typer.Option(Path("runs/zoo"), help="checkpoints, caches and logs; rerun to resume"),
    target_steps: int = typer.Option(ZOO_TARGET_STEPS, min=1,
                                     help="optimizer steps of the target's schedule"),
    drafter_steps: int = typer.Option(ZOO_DRAFTER_STEPS, min=1,
                                      help="optimizer steps of the drafter's schedule"),
    threads: int = typer.Option(ZOO_THREADS, min=1, help="torch CPU threads"),
    bf16: bool = typer.Option(True, "--bf16/--fp32",
                              help="bfloat16 autocast while training (weights stay fp32)"),
) -> None:
    """Rebuild tokenizer, target and drafter from scratch with fixed seeds (resumable) in RUN_DIR.

    Nothing is written into the package: `python -m zoo_build publish` swaps a finished run in."""
    from zoo_build import build

    if step != "all" and step not in STEPS:
        raise typer.BadParameter(f"unknown step {step!r}; use tokenizer, target, drafter or all")
    for name in STEPS if step == "all" else [step]:
        build.run_step(name, run_dir, target_steps=target_steps, drafter_steps=drafter_steps, threads=threads,
                       bf16=bf16)


@app.command("publish")
def publish(
    run_dir: Path = typer.Option(Path("runs/zoo"), help="a finished `train` run"),
) -> None:
    """Replace the package's zoo target and drafter by a finished run's (atomic; training never writes
    there)."""
    from specpolicy.zoo import ZOO_DIR
    from zoo_build import build

    build.publish(run_dir)
    typer.echo(f"published {run_dir}/target and {run_dir}/drafter into {ZOO_DIR}; rebuild the shipped "
               f"sweeps, "
               "predictors and card on them")


@app.command("card")
def card(
    run_dir: Path = typer.Option(Path("runs/zoo"), help="the zoo's training run (summaries, timings)"),
    prompts: int = typer.Option(CARD_PROMPTS, min=1, help="prompts per dataset and temperature"),
    out: Path = typer.Option(None, help="where to write the card (default: next to the shipped weights)"),
) -> None:
    """Measure the shipped zoo (tau per block size, per-prompt optimum, speed) and write its model card."""
    from specpolicy.zoo import ZOO_DIR
    from zoo_build.card import measure, render

    if run_dir.exists() and not run_dir.is_dir():
        raise typer.BadParameter(f"{run_dir} is a file; pass the folder of a `python -m zoo_build train` run",
                                 param_hint="--run-dir")
    result = measure(run_dir, prompts)
    (run_dir / "card.json").write_text(json.dumps(result, indent=2))
    path = out or ZOO_DIR / "MODEL_CARD.md"
    path.write_text(render(result))
    typer.echo(f"model card written to {path}")


@app.command("roofline")
def roofline(
    gpu: str = typer.Option("H200", help="the GPU whose datasheet peaks price the passes (H200 or H100)"),
    out: Path = typer.Option(None,
                             help="where to write the table (default: the zoo folder, beside the H200 one)"),
) -> None:
    """Write the synthetic batch cost table of Qwen3-4B and its DFlash drafter on a GPU (a roofline model)."""
    from specpolicy.zoo import ZOO_DIR
    from zoo_build.roofline import roofline_batch_costs

    try:
        table = roofline_batch_costs(gpu)  # checks the GPU before any work
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--gpu") from None
    path = out or ZOO_DIR / f"batch-costs-{gpu.lower()}-synthetic.json"
    table.save(path)
    typer.echo(f"synthetic batch cost table written to {path}")


@app.command("measured")
def measured() -> None:
    """Write the measured GPU cost tables from the CAST rows shipped in specpolicy/zoo/measured."""
    from zoo_build.measured import build

    for path in build():
        typer.echo(f"measured cost table written to {path}")


@app.command("measured-steps")
def measured_steps() -> None:
    """Write the measured H200 serving tables from specpolicy's own steps (h200-sxm-steps-torch.json)."""
    from zoo_build.measured import steps_tables

    for path in steps_tables():
        typer.echo(f"measured serving table written to {path}")


SERVING_TABLES = {"models": {"meta-llama/Meta-Llama-3.1-8B": "llama-3.1-8b", "Qwen/Qwen3-8B": "qwen3-8b"},
                  "gpus": ("h100_sxm", "h200_sxm"), "engines": ("vllm", "sglang"),
                  "drafters": ("dflash", "eagle3"),
                  "contexts": (1024, 8192)}
"""the serving cost tables shipped in specpolicy/zoo/measured (aiconfigurator's measured operators), and the
one checked against LLMServingSim's measured vLLM steps on an RTX PRO 6000"""
RTX_CHECK = ("meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b", "rtx_pro_6000_server", "vllm", "dflash", 1024)


@app.command("serving")
def serving() -> None:
    """Write the shipped serving cost tables (needs `pip install 'specpolicy[aiconfigurator]'`)."""
    from itertools import product

    from specpolicy.bench.serving_costs import serving_costs
    from specpolicy.zoo import MEASURED_DIR

    grid = SERVING_TABLES
    tables = product(grid["models"].items(), grid["gpus"], grid["engines"], grid["drafters"],
                     grid["contexts"])
    for (model, short), gpu, engine, drafter, context in [*tables, (RTX_CHECK[:2], *RTX_CHECK[2:])]:
        path = MEASURED_DIR / f"aic-{gpu.replace('_', '-')}-{engine}-{short}-{drafter}-context-{context}.json"
        serving_costs(model, gpu, engine, drafter, context).save(path)
        typer.echo(f"serving cost table written to {path}")


if __name__ == "__main__":
    app()
