"""``specpolicy train NAME --sweep DIR``: train a learned policy from a sweep store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specpolicy.cli.common import fail, stderr


def train(
    policy: str = typer.Argument("blockpilot", help="learned policy: blockpilot, logreg, forest, knn, gboost"),
    sweep: Path = typer.Option(..., help="sweep store of training prompts"),
    out: Path = typer.Option(..., help="output folder for the trained policy"),
    label: str = typer.Option("tau", help="tau (argmax tau) or tokens_per_second (argmax modelled tokens/s)"),
    hidden: int = typer.Option(2048, help="BlockPilot hidden size"),
    depth: int = typer.Option(2, help="BlockPilot depth"),
    preprocess: str = typer.Option("raw", help="BlockPilot input: raw, normalised or softmax"),
    window: int = typer.Option(None, help="k: keep candidates within +-k of the training block size"),
    epochs: int = typer.Option(100, min=1),
    lr: float = typer.Option(1e-5, help="BlockPilot learning rate"),
    patience: int = typer.Option(15, min=1),
    objective: str = typer.Option("cross_entropy", help="BlockPilot loss: cross_entropy or expected_tau"),
    shuffle_labels: bool = typer.Option(False, help="control: train on permuted labels"),
    seed: int = typer.Option(0),
) -> None:
    """Train a learned policy from a sweep: oracle labels, a split by prompt, early stopping; prints JSON."""
    from specpolicy.train import TrainArgs, main

    args = TrainArgs(policy=policy, sweep=sweep, out=out, label=label, hidden=hidden, depth=depth,
                     preprocess=preprocess, window=window, epochs=epochs, lr=lr, patience=patience,
                     objective=objective, shuffle_labels=shuffle_labels, seed=seed)
    try:
        summary = main(args)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from exc
    summary.pop("history", None)
    typer.echo(json.dumps(summary, indent=2, default=str))
    stderr.print(f"saved {policy} to {out}; use it as {policy}:{out}")
