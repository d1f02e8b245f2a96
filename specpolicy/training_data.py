"""Training sets for learned policies, built from a sweep store."""

from __future__ import annotations

import hashlib

import numpy as np

from specpolicy.policy import TRAINING_BLOCK_SIZE, TrainingSet, oracle_label
from specpolicy.sweep.replay import ReplayTable
from specpolicy.sweep.store import SweepStore

LABELS = ("tau", "tokens_per_second")


def training_set(store: SweepStore, label: str = "tau") -> TrainingSet:
    """Features and oracle labels of every valid record.

    ``label="tau"``: argmax tau (the paper). ``label="tokens_per_second"``: argmax modelled tokens/s
    (needs a replay sweep with a latency table).
    """
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}; use one of {', '.join(LABELS)}")
    candidates = store.candidates
    training = int(store.meta.get("training_block_size", TRAINING_BLOCK_SIZE))
    records = list(store.records())
    if not records:
        raise ValueError(f"sweep store {store.path} has no valid records")
    latency = store.latency()
    if label == "tokens_per_second" and (latency is None or "replay" not in records[0]):
        raise ValueError("label tokens_per_second needs a replay sweep with latency.json")
    taus = store.tau_matrix(records)
    if label == "tau":
        scores = taus
    else:
        scores = np.array([[table.modelled_tokens_per_second(b, latency) for b in candidates]
                           for table in map(ReplayTable.from_record, records)])
    labels = np.array([oracle_label(row, candidates, training) for row in scores], dtype=np.int64)
    return TrainingSet(
        logits=store.feature_matrix(records),
        prompt_lengths=np.array([r.get("prompt_length", 0) for r in records], dtype=np.int64),
        labels=labels,
        taus=taus,
        candidates=candidates,
        prompt_ids=[r["prompt_id"] for r in records],
    )


def split_by_prompt(data: TrainingSet, validation_share: float = 0.2, seed: int = 0) -> tuple[TrainingSet, TrainingSet]:
    """Deterministic split by a hash of the prompt id, so a prompt is never on both sides."""
    bucket = np.array([int(hashlib.sha256(f"{seed}:{pid}".encode()).hexdigest(), 16) % 1000 / 1000
                       for pid in data.prompt_ids])
    validation = bucket < validation_share
    return data.subset(np.where(~validation)[0]), data.subset(np.where(validation)[0])
