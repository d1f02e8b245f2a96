"""Train a learned block-size policy from a sweep store (``specpolicy train``; reads top to bottom):
regressors learn cycles per token of every candidate (machine-free), classifiers the fastest or argmax-tau
label; prompts split by id hash into train / validation (early stopping); ``--shuffle-labels``: a control."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from specpolicy import defaults
from specpolicy.arguments import check_candidate_set, check_count, check_real
from specpolicy.files import atomic_path, check_replaceable, write_text
from specpolicy.policy import TRAINING_BLOCK_SIZE, LearnedPolicy, TrainingSet, oracle_label


@dataclass
class TrainArgs:
    policy: str = "blockpilot"
    """learned policy family: blockpilot, logreg, forest, knn, gboost, or a plugin's"""
    sweep: Path = Path("runs/sweep-train")
    """sweep store of the training prompts"""
    out: Path = Path("runs/policy")
    """folder for the trained policy (weights in safetensors or skops, settings in JSON)"""
    label: str = "time"
    """label: time (fastest candidate by modelled time) or tau (argmax tau, as the paper)"""
    candidates: tuple[int, ...] | None = None
    """train over this subset of the sweep's block sizes (default: all of them)"""
    costs: Path | None = None
    """price time labels with this cost table (default: the sweep's latency.json)"""
    validation_share: float = defaults.VALIDATION_SHARE
    """share of prompts held out for early stopping"""
    window: int | None = None
    """k: keep only candidates within +-k of the training block size (ablation)"""
    hidden: int = defaults.BLOCKPILOT_HIDDEN
    """BlockPilot hidden size"""
    depth: int = defaults.BLOCKPILOT_DEPTH
    """BlockPilot depth (1 = no residual block)"""
    dropout: float = defaults.BLOCKPILOT_DROPOUT
    """BlockPilot dropout"""
    preprocess: str = defaults.BLOCKPILOT_PREPROCESS
    """BlockPilot input: raw (the paper's), normalised or softmax"""
    epochs: int = defaults.BLOCKPILOT_EPOCHS
    """BlockPilot epochs (upper bound with early stopping)"""
    lr: float = defaults.BLOCKPILOT_LR
    """BlockPilot learning rate (AdamW; the paper's Adam uses 1e-5)"""
    batch_size: int = defaults.BLOCKPILOT_BATCH_SIZE
    """BlockPilot batch size"""
    weight_decay: float = defaults.BLOCKPILOT_WEIGHT_DECAY
    """BlockPilot decoupled weight decay (AdamW)"""
    patience: int = defaults.PATIENCE
    """epochs without validation improvement before stopping"""
    objective: str = defaults.BLOCKPILOT_OBJECTIVE
    """BlockPilot loss: cycles (predict cycles per token of every block size: portable), cross_entropy
    (classify the labels, as the paper) or expected_value (cost-sensitive classification)"""
    shuffle_labels: bool = False
    """control: train on outcomes (labels, taus and values) permuted across prompts"""
    seed: int = 0
    """seed for the split, initialisation and batches"""
    extra: dict = field(default_factory=dict)
    """metadata written next to the weights"""

    def __post_init__(self) -> None:
        """The command's checks of its options, for callers from Python too (before any data is read)."""
        for what in ("epochs", "batch_size", "patience", "hidden", "depth"):
            check_count(getattr(self, what), what)
        check_real(self.lr, "lr", 0, strict_low=True)
        check_real(self.weight_decay, "weight_decay", 0)
        check_real(self.dropout, "dropout", 0, 1, strict_high=True)
        if self.window is not None:
            check_count(self.window, "window", 0)
        check_real(self.validation_share, "validation_share (of prompts held out for early stopping)", 0,
                   defaults.MAX_VALIDATION_SHARE)
        if self.candidates is not None:
            self.candidates = check_candidate_set(self.candidates, "candidates")


def restrict(data: TrainingSet, window: int, training_block_size: int) -> TrainingSet:
    """Keep the candidates within ``window`` of the training block size and relabel."""
    keep = [j for j, b in enumerate(data.candidates) if abs(b - training_block_size) <= window]
    if not keep:
        raise ValueError(f"no candidate within {window} of {training_block_size} in {list(data.candidates)}")
    candidates = tuple(data.candidates[j] for j in keep)
    values = data.values[:, keep]
    labels = np.array([oracle_label(row, candidates, training_block_size) for row in values])
    return replace(data, labels=labels, taus=data.taus[:, keep], candidates=candidates, values=values,
                   cycles_per_token=data.cycles_per_token[:, keep])


SUMMARY_NAME = "training_summary.json"
"""what marks a folder as a trained policy's (train replaces such a folder whole, and refuses any other)"""

FIT_OPTIONS = ("epochs", "lr", "batch_size", "weight_decay", "patience", "objective")
"""the options ``fit`` receives, where the family reads them (shape options go to its untrained builder)"""
FAMILY_OPTIONS = ("hidden", "depth", "dropout", "preprocess", *FIT_OPTIONS)


def family_options(args: TrainArgs, policy: LearnedPolicy) -> dict:
    """The fit options ``policy`` reads; a family option given that it does not read is refused, naming it."""
    given = [k for k in FAMILY_OPTIONS if getattr(args, k) != getattr(TrainArgs, k)]
    unread = [k for k in given if k not in policy.training_options]
    if unread:
        flags = ", ".join("--" + k.replace("_", "-") for k in unread)
        reads = ", ".join("--" + k.replace("_", "-") for k in policy.training_options) or "none of them"
        raise ValueError(f"{args.policy} does not read {flags}; drop {'it' if len(unread) == 1 else 'them'} "
                         f"(of the model options it reads: {reads})")
    return {k: getattr(args, k) for k in FIT_OPTIONS if k in policy.training_options}


def build_policy(args: TrainArgs, data: TrainingSet) -> LearnedPolicy:
    """A fresh, untrained policy of ``args.policy`` over the training set's candidates."""
    from specpolicy.registry import get_registry

    family, _ = get_registry().parse(args.policy)
    if not family.learned:
        raise ValueError(f"policy {args.policy!r} is not a learned policy; learned ones: "
                         + ", ".join(f.name for f in get_registry().unique() if f.learned))
    policy = family.build_untrained(data.candidates, data, asdict(args))
    if not isinstance(policy, LearnedPolicy):
        raise ValueError(f"policy {args.policy!r} has no fit(); it cannot be trained")
    return policy


def main(args: TrainArgs, on_start: Callable[[], object] | None = None) -> dict:
    """Train, save to ``args.out`` and return a summary; ``on_start``: called once every input is checked."""
    from specpolicy.costs import CostTable
    from specpolicy.data.splits import validation_ids
    from specpolicy.sweep.store import SweepStore  # torch: imported only when training runs
    from specpolicy.training.data import split_by_prompt, training_set

    check_replaceable(args.out, SUMMARY_NAME)  # before any work: an earlier model is replaced, nothing else
    store = SweepStore.load(args.sweep)
    costs = CostTable.load(args.costs) if args.costs else None
    records = list(store.records())  # read once: the training set and the split both come from them
    data = training_set(store, args.label, args.candidates, costs, records)
    training_block_size = int(store.meta.get("training_block_size", TRAINING_BLOCK_SIZE))
    if args.window is not None:
        data = restrict(data, args.window, training_block_size)
    # break the link between features and outcomes (every per-prompt outcome together)
    if args.shuffle_labels:
        order = np.random.default_rng(args.seed).permutation(len(data))
        data.labels, data.taus, data.values = data.labels[order], data.taus[order], data.values[order]
        data.cycles_per_token = data.cycles_per_token[order]
    held = validation_ids([r.split_key for r in records], args.validation_share, args.seed)
    train, validation = split_by_prompt(data, held)
    if len(train) < 2:
        raise ValueError(f"sweep {args.sweep} has {len(data)} usable prompts; sweep more prompts to train on")
    policy = build_policy(args, data)
    fit_options = family_options(args, policy)
    if on_start is not None:
        on_start()
    start = time.time()
    summary = policy.fit(train, validation, seed=args.seed, **fit_options)
    majority = np.bincount(train.labels, minlength=len(data.candidates)).argmax()
    summary.update({
        "policy": args.policy, "train_prompts": len(train), "validation_prompts": len(validation),
        "candidates": list(data.candidates), "label": args.label, "shuffled_labels": args.shuffle_labels,
        "majority_class_validation_accuracy": (
            float((validation.labels == majority).mean()) if len(validation) else None
        ),
        "seconds": round(time.time() - start, 2), "sweep": str(args.sweep),
                    "sweep_models": store.meta.get("models"),
        "labels_priced_with": (costs or store.latency()).to_json()
        if args.label == "time" and summary.get("predicts", "label") == "label" else None,
    })
    if hasattr(policy, "settings"):
        policy.settings.metadata = {k: v for k, v in summary.items() if k != "history"} | args.extra
    record = {"args": {k: str(v) for k, v in asdict(args).items()}, **summary}
    with atomic_path(args.out, folder=SUMMARY_NAME) as folder:  # never half a model, never two mixed
        policy.save(folder)
        write_text(folder / SUMMARY_NAME, json.dumps(record, indent=2, default=str))
    return summary
