"""Training sets for learned policies, built from a sweep store."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specpolicy.arguments import check_candidate_set
from specpolicy.costs import CostTable
from specpolicy.policy import TRAINING_BLOCK_SIZE, TrainingSet, oracle_label
from specpolicy.replay.table import ReplayTable
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore

LABELS = ("time", "tau")


def candidate_values(store: SweepStore, records: list[SweepRecord], candidates: Sequence[int], label: str,
                     costs: CostTable | None = None) -> np.ndarray:
    """What each candidate is worth per prompt (higher is better), float64 [n, C]: ``label="time"``, minus the
    modelled time relative to AR (-1 / speedup) under ``costs``; ``label="tau"``, tau."""
    if label == "tau":
        return store.tau_matrix(records, candidates)
    costs = costs if costs is not None else store.latency()
    if costs is None or any(r.replay is None for r in records):
        raise ValueError(f"label 'time' needs a replay sweep with a cost table; {store.path} has "
                         + ("no latency.json (pass --costs FILE, or use --label tau)" if costs is None else
                            "records without replay tables (use --label tau)"))
    values = np.empty((len(records), len(candidates)))
    for i, table in enumerate(r.table() for r in records):
        seconds = table.fixed_seconds(costs, candidates)
        ar = max(1, table.tokens()) * costs.ar_seconds
        values[i] = [-seconds[b] / ar for b in candidates]
    return values


def training_set(store: SweepStore, label: str = "time", candidates: Sequence[int] | None = None,
                 costs: CostTable | None = None, records: Sequence[SweepRecord] | None = None) -> TrainingSet:
    """Features, per-candidate values and oracle labels of every valid record: ``label`` ``time`` (default) or
    ``tau``; ``candidates`` a subset of the store's; ``costs`` another machine's table; ``records``: read."""
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}; use one of {', '.join(LABELS)}")
    candidates = check_candidate_set(candidates) if candidates is not None else store.candidates
    missing = sorted(set(candidates) - set(store.candidates))
    if missing:
        raise ValueError(f"block sizes {missing} are not in the sweep's {list(store.candidates)}; pass a "
                         "subset")
    training = int(store.meta.get("training_block_size", TRAINING_BLOCK_SIZE))
    records = list(store.records()) if records is None else list(records)
    if not records:
        raise ValueError(f"sweep store {store.path} has no valid records")
    values = candidate_values(store, records, candidates, label, costs)
    tables = [r.table() if r.replay is not None else None for r in records]
    labels = np.array([oracle_label(row, candidates, training) for row in values], dtype=np.int64)
    return TrainingSet(
        logits=store.feature_matrix(records),
        prompt_lengths=np.array([r.prompt_length for r in records], dtype=np.int64),
        labels=labels,
        taus=store.tau_matrix(records, candidates),
        candidates=candidates,
        prompt_ids=[r.prompt_id for r in records],
        values=values,
        episodes=tables,
        costs=costs if costs is not None else store.latency(),
        cycles_per_token=None if None in tables
                       else np.array([cycles_per_token(t, candidates) for t in tables]),
    )


def cycles_per_token(table: ReplayTable, candidates: Sequence[int]) -> list[float]:
    """Cycles each candidate runs as a fixed block size per committed token: exact from the replay, [C]."""
    tokens = max(1, table.tokens())
    return [len(table.simulate(b)) / tokens for b in candidates]


def split_by_prompt(data: TrainingSet, validation: set[str]) -> tuple[TrainingSet, TrainingSet]:
    """(train, validation) sides of ``data``: the prompts named in ``validation`` and the rest."""
    held = np.array([pid in validation for pid in data.prompt_ids], dtype=bool)
    return data.subset(np.where(~held)[0]), data.subset(np.where(held)[0])
