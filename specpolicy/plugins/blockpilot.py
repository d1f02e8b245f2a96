"""BlockPilot (reference §1): an MLP on the target's last-token logits predicting per candidate ``predicts``:
``cycles_per_token`` (default, portable: the observation's cost table picks the fastest) or ``label`` (the
paper's classifier). Deciding is numpy only; training (:mod:`~specpolicy.plugins.blockpilot_fit`) is torch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from specpolicy.costs import CostTable
from specpolicy.defaults import BLOCKPILOT_DEPTH, BLOCKPILOT_DROPOUT, BLOCKPILOT_HIDDEN, BLOCKPILOT_OBJECTIVE
from specpolicy.features import get_extractor
from specpolicy.files import atomic_path, write_text
from specpolicy.plugins.skops_io import WEIGHTS_NAME, check_finite
from specpolicy.policy import DEFAULT_CANDIDATES, LearnedPolicy, PromptObservation, TrainingSet

INPUTS = ("logits", "normalised", "softmax")
"""the feature extractors (:data:`specpolicy.features.EXTRACTORS`) a predictor can read: its ``preprocess``"""
PREDICTS = ("cycles_per_token", "label")
SETTINGS_NAME = "blockpilot.json"


@dataclass
class BlockPilotSettings:
    """Shape, input and output meaning of the predictor (saved beside the weights); ``metadata``'s
    ``validated_with``: the table early stopping priced with, the fallback for an observation without one."""

    vocab_size: int
    candidates: list[int] = field(default_factory=lambda: list(DEFAULT_CANDIDATES))
    hidden: int = BLOCKPILOT_HIDDEN
    depth: int = BLOCKPILOT_DEPTH
    dropout: float = BLOCKPILOT_DROPOUT
    preprocess: str = "logits"  # what files saved before the setting existed read
    predicts: str = "cycles_per_token"
    metadata: dict = field(default_factory=dict)

    def validate(self) -> None:
        if self.preprocess not in INPUTS:
            raise ValueError(f"unknown BlockPilot input {self.preprocess!r}; use {', '.join(INPUTS)}")
        if self.predicts not in PREDICTS:
            raise ValueError(f"unknown prediction {self.predicts!r}; use one of {', '.join(PREDICTS)}")
        if self.depth < 1 or self.hidden < 1:
            raise ValueError(f"depth and hidden must be >= 1, got depth={self.depth}, hidden={self.hidden}")


def weight_shapes(settings: BlockPilotSettings) -> dict[str, tuple[int, ...]]:
    """The network's arrays by (torch) name and shape: ``shift``/``scale`` [V], ``input`` Linear(V -> h),
    ``blocks.{i}`` Linear(h -> h), ``output`` Linear(h -> C)."""
    v, h, c = settings.vocab_size, settings.hidden, len(settings.candidates)
    layers = {"input": (h, v), **{f"blocks.{i}": (h, h) for i in range(settings.depth - 1)}, "output": (c, h)}
    return {"shift": (v,), "scale": (v,), **{name: shape for layer, (rows, cols) in layers.items()
                                               for name, shape in ((f"{layer}.weight", (rows, cols)),
                                                                   (f"{layer}.bias", (rows,)))}}


def initial_weights(settings: BlockPilotSettings, seed: int = 0) -> dict[str, np.ndarray]:
    """Fresh weights drawn by numpy as ``nn.Linear`` draws them, identity standardisation (``specpolicy
    train`` draws with torch: :func:`~specpolicy.plugins.blockpilot_fit.torch_initial_weights`)."""
    rng, shapes = np.random.default_rng(seed), weight_shapes(settings)
    weights = {}
    for name, shape in shapes.items():
        if name in ("shift", "scale"):
            weights[name] = np.full(shape, float(name == "scale"), np.float32)
        else:
            bound = 1 / np.sqrt(shapes[name.replace(".bias", ".weight")][1])
            weights[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
    return weights


def forward(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """features [n, V] -> candidate outputs [n, C] (inference: no dropout), float32."""
    def linear(name: str, h: np.ndarray) -> np.ndarray:
        return h @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    h = np.maximum(linear("input", (x - weights["shift"]) / weights["scale"]), 0)
    i = 0
    while f"blocks.{i}.weight" in weights:
        h = h + np.maximum(linear(f"blocks.{i}", h), 0)
        i += 1
    return linear("output", h)


class BlockPilotPolicy(LearnedPolicy):
    """The BlockPilot predictor as a per-prompt policy."""

    training_options = ("hidden", "depth", "dropout", "preprocess", "epochs", "lr", "batch_size",
                        "weight_decay", "patience", "objective")

    def __init__(self, settings: BlockPilotSettings, weights: dict[str, np.ndarray] | None = None) -> None:
        settings.validate()
        super().__init__(settings.candidates)
        if tuple(settings.candidates) != self.candidates:
            raise ValueError(f"candidates must be sorted and distinct, got {settings.candidates}")
        self.settings = settings
        self.weights = initial_weights(settings) if weights is None else weights  # fresh, or loaded
        self.validated_with = self.validated_from(settings.metadata)

    def vocabulary(self) -> int:
        return self.settings.vocab_size

    def inputs(self, logits: np.ndarray) -> np.ndarray:
        """Preprocessed network input [n, V] from raw logits [n, V]."""
        logits = np.asarray(logits, dtype=np.float32)
        if logits.ndim == 1:
            logits = logits[None]
        if logits.shape[-1] != self.settings.vocab_size:
            raise ValueError(f"BlockPilot was trained on a vocabulary of {self.settings.vocab_size} logits "
                             f"but got {logits.shape[-1]}; use a predictor trained for this target")
        return np.asarray(get_extractor(self.settings.preprocess)(logits), dtype=np.float32)

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """The heads' outputs [n, C]: expected cycles per token, or class scores (``settings.predicts``)."""
        return forward(self.weights, self.inputs(logits))

    def choose(self, scores: np.ndarray, costs: Sequence[CostTable | None]) -> list[int]:
        """Block sizes from head outputs [n, C]: the fastest under each prompt's table, or the top class."""
        if self.settings.predicts == "label":
            offered = [self.candidates.index(b) for b in self.allowed or self.candidates]
            return [self.candidates[offered[int(i)]] for i in scores[:, offered].argmax(axis=-1)]
        return self.fastest_choices(scores, costs)

    def select(self, observation: PromptObservation) -> int:
        return self.select_batch([observation])[0]

    def select_batch(self, observations: Sequence[PromptObservation]) -> list[int]:
        if not observations:
            return []
        scores = self.scores(np.stack([o.logits for o in observations]))
        return self.choose(scores, [o.costs for o in observations])

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0,
            **options: object ) -> dict:
        """AdamW with early stopping on ``validation`` (:func:`~specpolicy.plugins.blockpilot_fit.fit`)."""
        from specpolicy.plugins.blockpilot_fit import fit

        return fit(self, dataset, validation, seed=seed, **options)

    def chosen_indices(self, dataset: TrainingSet) -> np.ndarray:
        """Candidate index chosen for every prompt of ``dataset`` (priced with its table), int64 [n]."""
        chosen = self.choose(self.scores(dataset.logits), [dataset.costs] * len(dataset))
        return np.array([self.candidates.index(b) for b in chosen], dtype=np.int64)

    def mean_value(self, dataset: TrainingSet) -> float:
        """Mean value (``dataset.values``) of the block sizes this policy picks on ``dataset``."""
        if len(dataset) == 0:
            return float("nan")
        return float(dataset.values[np.arange(len(dataset)), self.chosen_indices(dataset)].mean())

    def accuracy(self, dataset: TrainingSet) -> float:
        """Share of prompts whose chosen candidate equals the label."""
        if len(dataset) == 0:
            return float("nan")
        return float((self.chosen_indices(dataset) == dataset.labels).mean())

    # --- persistence ------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """``blockpilot.json`` (settings) + ``model.safetensors`` (weights) in folder ``path``."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        metadata = self.with_validated(self.settings.metadata)
        write_text(folder / SETTINGS_NAME,
                   json.dumps(asdict(self.settings) | {"metadata": metadata}, indent=2))
        with atomic_path(folder / WEIGHTS_NAME) as tmp:
            save_file({k: np.ascontiguousarray(v) for k, v in self.weights.items()}, str(tmp))

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> BlockPilotPolicy:
        """Load a saved predictor; a missing or damaged file fails naming it and the fix."""
        folder = Path(path)
        settings_file, weights_file = folder / SETTINGS_NAME, folder / WEIGHTS_NAME
        for file in (settings_file, weights_file):
            if not file.exists():
                raise FileNotFoundError(f"BlockPilot predictor file {file} is missing; train one with "
                                        "`specpolicy train blockpilot --sweep DIR --out FOLDER`")
        try:
            saved = json.loads(settings_file.read_text())
            if saved.get("preprocess") == "raw":  # files saved before the input took the extractors' names
                saved["preprocess"] = "logits"
            settings = BlockPilotSettings(**{"predicts": "label"} | saved)
            state = load_file(str(weights_file))
        except Exception as exc:
            raise ValueError(f"BlockPilot predictor in {folder} is corrupted ({type(exc).__name__}: {exc}); "
                             "retrain it or restore the files") from None
        check_finite(state, weights_file)
        for name in ("shift", "scale"):  # predictors saved before inputs were standardised read them raw
            state.setdefault(name, np.full(settings.vocab_size, float(name == "scale"), np.float32))
        # over the classes it was trained on, whatever ``candidates`` (a sweep check follows)
        policy = cls(settings, {name: array.astype(np.float32) for name, array in state.items()})
        shapes, needed = {name: tuple(array.shape) for name, array in state.items()}, weight_shapes(settings)
        if shapes != needed:
            raise ValueError(f"BlockPilot weights in {folder} do not match its settings: the file holds "
                             f"{shapes}, the settings need {needed}")
        return policy


def default_predictor_path(variant: str = "blockpilot") -> Path:
    """A BlockPilot predictor shipped with the zoo: ``blockpilot`` or ``blockpilot-paper`` (tau labels)."""
    from specpolicy.zoo import ZOO_DIR

    return ZOO_DIR / variant


def load_blockpilot(variant: str, arg: str | None, candidates: Sequence[int]) -> BlockPilotPolicy:
    """A trained predictor from ``arg`` (a folder), else the zoo's shipped ``variant``."""
    path = Path(arg).expanduser() if arg else default_predictor_path(variant)
    return BlockPilotPolicy.load(path, candidates)


blockpilot_policy = partial(load_blockpilot, "blockpilot")
blockpilot_paper_policy = partial(load_blockpilot, "blockpilot-paper")


def guarded_policy(arg: str | None, candidates: Sequence[int]):
    from specpolicy.plugins.guarded import GuardedPolicy

    return GuardedPolicy(blockpilot_policy(arg, candidates), candidates)


def untrained_blockpilot(candidates: Sequence[int], dataset: TrainingSet, options: dict) -> BlockPilotPolicy:
    """A fresh predictor for ``specpolicy train blockpilot`` (shape options from the training arguments), with
    torch's initial weights for the run's seed (same seed, same model)."""
    from specpolicy.plugins.blockpilot_fit import torch_initial_weights

    fields = ("hidden", "depth", "dropout", "preprocess")
    predicts = "cycles_per_token" if options.get("objective", BLOCKPILOT_OBJECTIVE) == "cycles" else "label"
    settings = BlockPilotSettings(vocab_size=dataset.prefill_features().shape[1], candidates=list(candidates),
                                  predicts=predicts, **{k: options[k] for k in fields if k in options})
    policy = BlockPilotPolicy(settings)
    policy.weights = torch_initial_weights(policy.settings, int(options.get("seed", 0)))
    return policy
