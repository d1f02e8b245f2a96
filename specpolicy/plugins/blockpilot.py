"""BlockPilot: an MLP that reads the target's raw last-token logits and picks the block size.

Architecture (BlockPilot, reference §1): Linear(V -> h) + ReLU + dropout 0.2, then ``depth - 1``
residual blocks Linear(h -> h) + ReLU + dropout, then Linear(h -> number of candidates).
Options cover the paper's ablations: hidden size, depth, candidate window (k) and input
preprocessing (raw / normalised / softmax).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from specpolicy.arrays import to_numpy
from specpolicy.defaults import (
    BLOCKPILOT_BATCH_SIZE,
    BLOCKPILOT_DEPTH,
    BLOCKPILOT_DROPOUT,
    BLOCKPILOT_EPOCHS,
    BLOCKPILOT_HIDDEN,
    BLOCKPILOT_LR,
    PATIENCE,
)
from specpolicy.features import get_extractor
from specpolicy.policy import DEFAULT_CANDIDATES, LearnedPolicy, PromptObservation, TrainingSet

PREPROCESS = {"raw": "logits", "normalised": "normalised", "softmax": "softmax"}
SETTINGS_NAME = "blockpilot.json"
OBJECTIVES = ("cross_entropy", "expected_value", "expected_tau")
WEIGHTS_NAME = "model.safetensors"


@dataclass
class BlockPilotSettings:
    """Shape and input of the predictor (saved next to the weights)."""

    vocab_size: int
    candidates: list[int] = field(default_factory=lambda: list(DEFAULT_CANDIDATES))
    hidden: int = BLOCKPILOT_HIDDEN
    depth: int = BLOCKPILOT_DEPTH
    dropout: float = BLOCKPILOT_DROPOUT
    preprocess: str = "raw"
    metadata: dict = field(default_factory=dict)

    def validate(self) -> None:
        if self.preprocess not in PREPROCESS:
            raise ValueError(f"unknown preprocessing {self.preprocess!r}; use raw, normalised or softmax")
        if self.depth < 1 or self.hidden < 1:
            raise ValueError(f"depth and hidden must be >= 1, got depth={self.depth}, hidden={self.hidden}")


class BlockPilotNet(nn.Module):
    """logits features [n, V] -> candidate scores [n, C]."""

    def __init__(self, settings: BlockPilotSettings) -> None:
        super().__init__()
        self.input = nn.Linear(settings.vocab_size, settings.hidden)
        self.blocks = nn.ModuleList(nn.Linear(settings.hidden, settings.hidden) for _ in range(settings.depth - 1))
        self.output = nn.Linear(settings.hidden, len(settings.candidates))
        self.dropout = nn.Dropout(settings.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(torch.relu(self.input(x)))
        for block in self.blocks:
            h = h + self.dropout(torch.relu(block(h)))
        return self.output(h)


class BlockPilotPolicy(LearnedPolicy):
    """The BlockPilot predictor as a per-prompt policy."""

    training_options = ("hidden", "depth", "dropout", "preprocess", "epochs", "lr", "batch_size", "patience",
                        "objective")

    def __init__(self, settings: BlockPilotSettings) -> None:
        settings.validate()
        super().__init__(settings.candidates)
        if tuple(settings.candidates) != self.candidates:
            raise ValueError(f"candidates must be sorted and distinct, got {settings.candidates}")
        self.settings = settings
        self.net = BlockPilotNet(settings).eval()

    def vocabulary(self) -> int:
        return self.settings.vocab_size

    def inputs(self, logits: np.ndarray) -> torch.Tensor:
        """Preprocessed network input [n, V] from raw logits [n, V]."""
        logits = np.asarray(logits, dtype=np.float32)
        if logits.ndim == 1:
            logits = logits[None]
        if logits.shape[-1] != self.settings.vocab_size:
            raise ValueError(f"BlockPilot was trained on a vocabulary of {self.settings.vocab_size} logits but got "
                             f"{logits.shape[-1]}; use a predictor trained for this target")
        return torch.from_numpy(get_extractor(PREPROCESS[self.settings.preprocess])(logits))

    @torch.no_grad()
    def scores(self, logits: np.ndarray) -> torch.Tensor:
        """Candidate scores [n, C]."""
        self.net.eval()
        return self.net(self.inputs(logits))

    def select(self, observation: PromptObservation) -> int:
        return self.candidates[int(self.scores(observation.logits)[0].argmax())]

    def select_batch(self, observations: Sequence[PromptObservation]) -> list[int]:
        if not observations:
            return []
        chosen = self.scores(np.stack([o.logits for o in observations])).argmax(dim=-1).tolist()
        return [self.candidates[i] for i in chosen]

    # --- training ---------------------------------------------------------------------------------------

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, epochs: int = BLOCKPILOT_EPOCHS,
            lr: float = BLOCKPILOT_LR, batch_size: int = BLOCKPILOT_BATCH_SIZE, patience: int = PATIENCE, seed: int = 0,
            objective: str = "cross_entropy") -> dict:
        """Adam with early stopping on the validation split (best validation score kept).

        ``objective="cross_entropy"``: the paper's classification of the labels (argmax tau, or the
        fastest candidate), scored by accuracy. ``objective="expected_value"``: cost-sensitive; maximises
        the softmax-weighted value of the candidates (``dataset.values``, per prompt, centred: minus
        relative time for time labels, tau for tau labels), scored by the mean value of the chosen
        block sizes. It uses how much each candidate loses, not only which one wins
        (``expected_tau`` is its old name).
        """
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
        if tuple(dataset.candidates) != self.candidates:
            raise ValueError(f"training set candidates {list(dataset.candidates)} differ from the policy's "
                             f"{list(self.candidates)}")
        torch.manual_seed(seed)
        x, y = self.inputs(dataset.logits), torch.as_tensor(dataset.labels)
        values = torch.as_tensor(dataset.values, dtype=torch.float32)
        gains = (values - values.mean(dim=1, keepdim=True)) / (values.std() + 1e-6)
        optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        score = self.accuracy if objective == "cross_entropy" else self.mean_value
        checked = validation if validation is not None and len(validation) else dataset
        best = (score(checked), {k: v.clone() for k, v in self.net.state_dict().items()}, 0)
        history = []
        generator = torch.Generator().manual_seed(seed)
        for epoch in range(1, epochs + 1):
            self.net.train()
            for batch in torch.randperm(len(y), generator=generator).split(batch_size):
                scores = self.net(x[batch])
                if objective == "cross_entropy":
                    loss = nn.functional.cross_entropy(scores, y[batch])
                else:
                    loss = -(torch.softmax(scores, dim=-1) * gains[batch]).sum(dim=-1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            value = score(checked)
            history.append({"epoch": epoch, "loss": round(loss.item(), 4), "train_accuracy": self.accuracy(dataset),
                            "validation_score": value})
            if value > best[0]:
                best = (value, {k: v.clone() for k, v in self.net.state_dict().items()}, epoch)
            elif epoch - best[2] >= patience:
                break
        self.net.load_state_dict(best[1])
        self.net.eval()
        return {"objective": objective, "best_epoch": best[2], "validation_score": best[0],
                "validation_accuracy": self.accuracy(checked), "train_accuracy": self.accuracy(dataset),
                "epochs_run": len(history), "history": history}

    def mean_value(self, dataset: TrainingSet) -> float:
        """Mean value (``dataset.values``) of the block sizes this policy picks on ``dataset``."""
        if len(dataset) == 0:
            return float("nan")
        predicted = to_numpy(self.scores(dataset.logits).argmax(dim=-1))
        return float(dataset.values[np.arange(len(dataset)), predicted].mean())

    def accuracy(self, dataset: TrainingSet) -> float:
        """Share of prompts whose predicted candidate equals the label."""
        if len(dataset) == 0:
            return float("nan")
        predicted = to_numpy(self.scores(dataset.logits).argmax(dim=-1))
        return float((predicted == dataset.labels).mean())

    # --- persistence ------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """``blockpilot.json`` (settings) + ``model.safetensors`` (weights) in folder ``path``."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SETTINGS_NAME).write_text(json.dumps(asdict(self.settings), indent=2))
        save_file({k: v.contiguous() for k, v in self.net.state_dict().items()}, str(folder / WEIGHTS_NAME))

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> BlockPilotPolicy:
        """Load a saved predictor, acting over the classes it was trained on (``candidates`` is not needed: a
        sweep that lacks one of them is refused by the evaluation); a missing or damaged file fails with its
        name and the fix."""
        folder = Path(path)
        settings_file, weights_file = folder / SETTINGS_NAME, folder / WEIGHTS_NAME
        for file in (settings_file, weights_file):
            if not file.exists():
                raise FileNotFoundError(f"BlockPilot predictor file {file} is missing; train one with "
                                        "`specpolicy train blockpilot --sweep DIR --out FOLDER`")
        try:
            settings = BlockPilotSettings(**json.loads(settings_file.read_text()))
            state = load_file(str(weights_file))
        except Exception as exc:
            raise ValueError(f"BlockPilot predictor in {folder} is corrupted ({type(exc).__name__}: {exc}); "
                             "retrain it or restore the files") from None
        broken = sorted(name for name, tensor in state.items() if not torch.isfinite(tensor).all())
        if broken:
            raise ValueError(f"BlockPilot weights in {folder} hold NaN or infinite values ({', '.join(broken[:4])}); "
                             "the training diverged: retrain it (e.g. with a lower --lr)")
        policy = cls(settings)  # over the classes it was trained on, whatever ``candidates`` (a sweep check follows)
        try:
            policy.net.load_state_dict(state)
        except RuntimeError as exc:
            raise ValueError(f"BlockPilot weights in {folder} do not match its settings: {exc}") from None
        policy.net.eval()
        return policy


def default_predictor_path(variant: str = "blockpilot") -> Path:
    """A BlockPilot predictor shipped with the tiny zoo: ``blockpilot`` (time labels over the whole
    range, the default) or ``blockpilot-paper`` (the paper's protocol: tau labels over 14..18)."""
    from specpolicy.zoo import ZOO_DIR

    return ZOO_DIR / variant


def load_blockpilot(variant: str, arg: str | None, candidates: Sequence[int]) -> BlockPilotPolicy:
    """A trained predictor from ``arg`` (a folder), else the zoo's shipped ``variant``."""
    path = Path(arg).expanduser() if arg else default_predictor_path(variant)
    return BlockPilotPolicy.load(path, candidates)


blockpilot_policy = partial(load_blockpilot, "blockpilot")
blockpilot_paper_policy = partial(load_blockpilot, "blockpilot-paper")


def guarded_policy(arg: str | None, candidates: Sequence[int]):
    from specpolicy.plugins.cycle_rules import GuardedPolicy

    return GuardedPolicy(blockpilot_policy(arg, candidates), candidates)


def untrained_blockpilot(candidates: Sequence[int], dataset: TrainingSet, options: dict) -> BlockPilotPolicy:
    """A fresh predictor for ``specpolicy train blockpilot`` (shape options from the training arguments)."""
    fields = ("hidden", "depth", "dropout", "preprocess")
    return BlockPilotPolicy(BlockPilotSettings(vocab_size=dataset.logits.shape[1], candidates=list(candidates),
                                               **{k: options[k] for k in fields if k in options}))
