"""Training BlockPilot: AdamW, early stopping on a validation split (reads top to bottom); objectives
``cycles`` (default, portable), ``cross_entropy`` (the paper's labels) and ``expected_value``."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from specpolicy import defaults
from specpolicy.features import to_numpy
from specpolicy.policy import TrainingSet

OBJECTIVES = ("cycles", "cross_entropy", "expected_value", "expected_tau")


class BlockPilotNet(nn.Module):
    """features [n, V] -> candidate outputs [n, C] (inputs standardised by the ``shift``/``scale`` buffers):
    the torch twin of :func:`~specpolicy.plugins.blockpilot.forward`, with dropout, for training."""

    def __init__(self, settings) -> None:
        super().__init__()
        self.register_buffer("shift", torch.zeros(settings.vocab_size))
        self.register_buffer("scale", torch.ones(settings.vocab_size))
        self.input = nn.Linear(settings.vocab_size, settings.hidden)
        self.blocks = nn.ModuleList(nn.Linear(settings.hidden, settings.hidden)
                                    for _ in range(settings.depth - 1))
        self.output = nn.Linear(settings.hidden, len(settings.candidates))
        self.dropout = nn.Dropout(settings.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(torch.relu(self.input((x - self.shift) / self.scale)))
        for block in self.blocks:
            h = h + self.dropout(torch.relu(block(h)))
        return self.output(h)

    def arrays(self) -> dict[str, np.ndarray]:
        """The weights as the policy holds them: float32 arrays by ``state_dict`` name."""
        return {k: to_numpy(v).copy() for k, v in self.state_dict().items()}


def torch_initial_weights(settings, seed: int) -> dict[str, np.ndarray]:
    """torch's initial weights for ``seed`` (what ``specpolicy train`` has always started from)."""
    torch.manual_seed(seed)
    return BlockPilotNet(settings).arrays()


def standardise(net: BlockPilotNet, x: torch.Tensor) -> None:
    """Set the net's input ``shift``/``scale`` buffers to the training inputs' mean and spread [V]."""
    net.shift.copy_(x.mean(dim=0))
    net.scale.copy_(x.std(dim=0).clamp_min(1e-3))


def batch_loss(net: BlockPilotNet, objective: str, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The objective's loss on one minibatch (targets: cycles per token, labels or centred values)."""
    outputs = net(x)
    if objective == "cycles":
        return nn.functional.mse_loss(outputs, targets)
    if objective == "cross_entropy":
        return nn.functional.cross_entropy(outputs, targets)
    return -(torch.softmax(outputs, dim=-1) * targets).sum(dim=-1).mean()


def training_targets(objective: str, dataset: TrainingSet) -> torch.Tensor:
    """What the loss compares the outputs with: [n, C] floats, or [n] labels."""
    if objective == "cycles":
        return torch.as_tensor(dataset.cycles_per_token, dtype=torch.float32)
    if objective == "cross_entropy":
        return torch.as_tensor(dataset.labels)
    values = torch.as_tensor(dataset.values, dtype=torch.float32)
    return (values - values.mean(dim=1, keepdim=True)) / (values.std() + 1e-6)


def validation_score(policy, objective: str, dataset: TrainingSet) -> float:
    """Higher is better: minus the modelled relative time of the choices (``cycles`` with a table), minus
    the squared error (``cycles`` without one), accuracy or the mean value of the choices."""
    if objective == "cycles":
        rows = np.arange(len(dataset))
        if dataset.costs is None:
            error = policy.scores(dataset.logits) - dataset.cycles_per_token
            return -float((error ** 2).mean())
        chosen = policy.chosen_indices(dataset)
        seconds = np.array([dataset.costs.fixed_cycle_seconds(policy.candidates[j]) for j in chosen])
        return -float((dataset.cycles_per_token[rows, chosen] * seconds).mean() / dataset.costs.ar_seconds)
    return policy.accuracy(dataset) if objective == "cross_entropy" else policy.mean_value(dataset)


def fit(policy, dataset: TrainingSet, validation: TrainingSet | None = None,
        epochs: int = defaults.BLOCKPILOT_EPOCHS, lr: float = defaults.BLOCKPILOT_LR,
        batch_size: int = defaults.BLOCKPILOT_BATCH_SIZE, patience: int = defaults.PATIENCE, seed: int = 0,
        objective: str | None = None, weight_decay: float = defaults.BLOCKPILOT_WEIGHT_DECAY) -> dict:
    """Train ``policy`` in place, keeping the best validation epoch; ``objective`` defaults to what its heads
    predict. Returns a summary with the per-epoch history."""
    if objective is None:
        by_cycles = policy.settings.predicts == "cycles_per_token"
        objective = defaults.BLOCKPILOT_OBJECTIVE if by_cycles else "cross_entropy"
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
    predicts = "cycles_per_token" if objective == "cycles" else "label"
    if policy.settings.predicts != predicts:
        raise ValueError(f"this predictor's heads hold {policy.settings.predicts}; objective {objective!r} "
                         f"trains {predicts}: build it for that objective")
    if tuple(dataset.candidates) != policy.candidates:
        raise ValueError(f"training set candidates {list(dataset.candidates)} differ from the policy's "
                         f"{list(policy.candidates)}")
    net = BlockPilotNet(policy.settings)
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in policy.weights.items()})
    torch.manual_seed(seed)
    x, targets = torch.from_numpy(policy.inputs(dataset.logits)), training_targets(objective, dataset)
    standardise(net, x)
    if objective == "cycles":  # start from the mean outcome: early epochs then already price sensibly
        with torch.no_grad():
            net.output.bias.copy_(targets.mean(dim=0))
    checked = validation if validation is not None and len(validation) else dataset

    def score() -> float:  # the policy decides with the net's current weights
        policy.weights = net.arrays()
        return validation_score(policy, objective, checked)

    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    best = (score(), policy.weights, 0)
    history = []
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(1, epochs + 1):
        net.train()
        for batch in torch.randperm(len(x), generator=generator).split(batch_size):
            loss = batch_loss(net, objective, x[batch], targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        net.eval()
        value = score()
        history.append({"epoch": epoch, "loss": round(loss.item(), 6), "validation_score": value})
        if value > best[0]:
            best = (value, policy.weights, epoch)
        elif epoch - best[2] >= patience:
            break
    policy.weights = best[1]
    summary = {"objective": objective, "predicts": predicts, "best_epoch": best[2],
               "validation_score": best[0], "epochs_run": len(history), "history": history}
    if predicts == "label":
        summary |= {"validation_accuracy": policy.accuracy(checked),
                    "train_accuracy": policy.accuracy(dataset)}
    if checked.costs is not None:
        policy.validated_with = checked.costs
        summary["validated_with"] = checked.costs.to_json()
    return summary
