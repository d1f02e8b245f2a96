"""``specpolicy train NAME --sweep DIR``: train a learned policy from a sweep store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specpolicy.cli.common import SeedOption, settings_from, stderr
from specpolicy.defaults import MAX_VALIDATION_SHARE
from specpolicy.training.train import TrainArgs

_D = TrainArgs()  # every default comes from the one dataclass
SCORES = {"cycles": "minus the modelled time per token of its validation choices, in plain AR steps "
                    "(higher is better: -1 is plain AR's speed, -0.5 twice as fast)",
          "cross_entropy": "its accuracy against the oracle's labels on the validation prompts",
          "expected_value": "the mean value of its validation choices (higher is better)"}


def train(
    policy: str = typer.Argument("blockpilot", help="learned policy: blockpilot, logreg, forest, knn, "
                                                    "gboost"),
    sweep: Path = typer.Option(..., help="sweep store of training prompts"),
    out: Path = typer.Option(..., help="output folder for the trained policy"),
    label: str = typer.Option(_D.label, help="time (fastest candidate by modelled time) or tau (argmax tau)"),
    candidates: str = typer.Option(None, help="train over this subset of the sweep's block sizes"),
    costs: Path = typer.Option(None, help="cost table for time labels and validation (default: the sweep's)"),
    hidden: int = typer.Option(_D.hidden, help="BlockPilot hidden size"),
    depth: int = typer.Option(_D.depth, help="BlockPilot depth"),
    dropout: float = typer.Option(_D.dropout, help="BlockPilot dropout"),
    preprocess: str = typer.Option(_D.preprocess, help="BlockPilot input: logits, normalised or softmax"),
    window: int = typer.Option(None, help="k: keep candidates within +-k of the training block size"),
    epochs: int = typer.Option(_D.epochs, min=1),
    lr: float = typer.Option(_D.lr, help="BlockPilot learning rate"),
    batch_size: int = typer.Option(_D.batch_size, min=1, help="BlockPilot batch size"),
    weight_decay: float = typer.Option(_D.weight_decay, min=0.0, help="BlockPilot weight decay (AdamW)"),
    patience: int = typer.Option(_D.patience, min=1),
    validation_share: float = typer.Option(_D.validation_share, min=0.0, max=MAX_VALIDATION_SHARE,
                                          help="share of the prompts held out for early stopping (at most "
                                               "half)"),
    objective: str = typer.Option(_D.objective, help="BlockPilot: cycles (portable), cross_entropy, "
                                                     "expected_value"),
    shuffle_labels: bool = typer.Option(False, help="control: train on permuted labels"),
    seed: int = SeedOption,
) -> None:
    """Train a learned policy from a sweep: oracle labels, a split by conversation and input; prints JSON."""
    from specpolicy.cli.sweep import parse_candidates
    from specpolicy.training.train import main

    sizes = tuple(parse_candidates(candidates)) if candidates else None
    args = settings_from(TrainArgs, locals(), candidates=sizes)
    summary = main(args, on_start=lambda: stderr.print(f"training {policy} on {sweep}; the summary prints "
                                                       "when it is done", highlight=False))
    summary.pop("history", None)
    typer.echo(json.dumps(summary, indent=2, default=str))
    if summary.get("objective") in SCORES and "validation_score" in summary:
        stderr.print(f"validation score {summary['validation_score']:.3f}: {SCORES[summary['objective']]}",
                     highlight=False, soft_wrap=True)
    stderr.print(f"saved {policy} to {out}; use it as {policy}:{out}")
