"""A planted signal for learned policies: the best of five block sizes is the largest of the first five
logits."""

from __future__ import annotations

import numpy as np

from specpolicy.plugins.blockpilot import BlockPilotPolicy, BlockPilotSettings
from specpolicy.policy import TrainingSet

CANDIDATES = (14, 15, 16, 17, 18)
VOCAB = 64


def planted(n: int, seed: int, shuffle: bool = False) -> TrainingSet:
    """Label = which of the first five logits is largest (a signal an MLP can read)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1, (n, VOCAB)).astype(np.float32)
    labels = logits[:, :5].argmax(axis=1)
    if shuffle:
        labels = rng.permutation(labels)
    taus = np.eye(5)[labels] + 3.0
    return TrainingSet(logits, rng.integers(5, 200, n), labels, taus, CANDIDATES, [f"p{i}" for i in range(n)])


def small_blockpilot(hidden: int = 64, predicts: str = "label") -> BlockPilotPolicy:
    """The paper's classifier by default (``predicts="cycles_per_token"``: the portable regressor)."""
    return BlockPilotPolicy(BlockPilotSettings(vocab_size=VOCAB, candidates=list(CANDIDATES), hidden=hidden,
                                               predicts=predicts))
