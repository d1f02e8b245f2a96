"""Tables the replay environments read: per-prompt observations and every candidate's outcome."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.defaults import COST_WEIGHT
from specpolicy.envs.episode import Episode, prompt_index
from specpolicy.envs.rewards import check_reward
from specpolicy.features import get_extractor
from specpolicy.replay.table import ReplayTable
from specpolicy.sweep.store import SweepStore

OBSERVATION_BOUND = 1e4


def prompt_features(features: str, logits: np.ndarray, prompt_lengths: np.ndarray) -> np.ndarray:
    """The per-prompt environment's observations: ``features`` of the prefill logits [n, V] and lengths [n],
    clipped to +-OBSERVATION_BOUND, float32 [n, d] (replay, live and an agent deployed as a policy alike)."""
    observed = get_extractor(features)(logits, prompt_lengths)
    return np.clip(observed, -OBSERVATION_BOUND, OBSERVATION_BOUND).astype(np.float32)


SHIPPED_SPLITS = {"train": "sharegpt-train", "validation": "sharegpt-train", "test": "sharegpt"}
"""the zoo's shipped replay sweeps: ShareGPT's training store, split by a hash of the prompt id into ``train``
and ``validation`` (the prompts ``specpolicy train`` holds out), and the held-out store ``test``"""


def shipped_sweep(split: str = "train") -> SweepStore:
    """The zoo's shipped replay sweep of ``split``, reading exactly that split's prompts."""
    from specpolicy.defaults import SWEEPS_DIR

    if split not in SHIPPED_SPLITS:
        raise ValueError(f"unknown split {split!r}; the zoo ships {', '.join(SHIPPED_SPLITS)} (or pass "
                         "sweep=DIR, e.g. a store from `specpolicy sweep --dataset sharegpt-validation`)")
    path = SWEEPS_DIR / SHIPPED_SPLITS[split]
    if not (path / "meta.json").exists():
        raise FileNotFoundError(f"no shipped sweep at {path}; pass sweep=DIR (a store from `specpolicy "
                                "sweep`)")
    return SweepStore.load(path, split=None if split == "test" else split)


@dataclass
class ReplayData:
    """The replay source: observations [n, d] (float32, clipped to +-1e4), rewards [n, C] and the replay
    tables of a sweep store (episodes as :class:`~specpolicy.envs.sources.Episode`)."""

    kind: ClassVar[str] = "replay"

    store: SweepStore
    candidates: tuple[int, ...]
    observations: np.ndarray
    rewards: np.ndarray
    taus: np.ndarray
    tables: list[ReplayTable | None]
    prompt_ids: list[str]
    latency: CostTable | None

    @classmethod
    def load(cls, sweep: str | Path | SweepStore | None = None, features: str = "logits", reward: str = "tau",
             cost_weight: float = COST_WEIGHT, split: str | None = None) -> ReplayData:
        """Read a sweep store (``reward``: a per-prompt name of :data:`~specpolicy.envs.rewards.REWARDS`);
        ``split`` picks a shipped sweep (``train``, ``validation``, ``test``), or a side of ``sweep``."""
        check_reward(reward, "prompt", "replay")
        if sweep is None:
            store = shipped_sweep(split or "train")
        elif isinstance(sweep, SweepStore) and split in (None, sweep.split):
            store = sweep
        else:
            store = SweepStore.load(sweep.path if isinstance(sweep, SweepStore) else sweep, split=split)
        records = list(store.records())
        if not records:
            raise ValueError(f"sweep store {store.path} has no valid records")
        candidates = store.candidates
        logits = store.feature_matrix(records)
        lengths = np.array([r.prompt_length for r in records])
        obs = prompt_features(features, logits, lengths)
        taus = store.tau_matrix(records)
        tables = [r.table() if r.replay is not None else None for r in records]
        latency = store.latency()
        if reward == "tau":
            rewards = taus
        elif reward == "cost":
            rewards = taus - cost_weight * (np.asarray(candidates, dtype=np.float64) - 1)
        else:
            if latency is None or any(t is None for t in tables):
                raise ValueError(f"reward {reward} needs a replay sweep with latency.json")
            per_table = [t.fixed_seconds(latency, candidates) for t in tables]
            seconds = np.array([[fixed[b] for b in candidates] for fixed in per_table])
            if reward == "seconds":
                rewards = -seconds / latency.ar_seconds
            else:
                tokens = np.array([t.tokens() for t in tables], dtype=np.float64)[:, None]
                rewards = tokens / seconds
        return cls(store, candidates, obs, rewards, taus, tables, [r.prompt_id for r in records], latency)

    @property
    def budget(self) -> int:
        """The sweep's token budget per decode."""
        return int(self.store.meta["max_new_tokens"])

    @property
    def observation_size(self) -> int:
        return self.observations.shape[1]

    def episode(self, rng: np.random.Generator, index: int | None = None) -> Episode:
        """Prompt ``index`` (default: a random one) as a replay session (``None`` for a live-mode store)."""
        index = prompt_index(rng, index, len(self.prompt_ids))
        table = self.tables[index]
        session, budget = (None, self.budget) if table is None else (table.session(), table.budget)
        return Episode(session, self.prompt_ids[index], budget, self.observations[index], index)

    def outcome(self, episode: Episode, action: int) -> tuple[float, dict]:
        """The reward and info of decoding the episode's prompt at candidate ``action``, from the sweep."""
        index, size = episode.index, self.candidates[action]
        table = self.tables[index]
        accepted = [c.accepted for c in table.simulate(size)] if table is not None else []
        return float(self.rewards[index, action]), {"block_size": size, "accepted": accepted,
                                                    "tau": float(self.taus[index, action]),
                                                    "prompt_id": self.prompt_ids[index]}
