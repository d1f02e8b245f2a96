"""``verify-head``: ``adaptive``'s B, then the L with the most expected tokens per modelled second, reading
P(draft k passes | the drafts before passed) from a logistic model of the drafter's confidences (confidence,
log running product, place in the block, B), trained on replay tables with confidences; numpy at run time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specpolicy.plugins import skops_io
from specpolicy.plugins.cycle_rules import AdaptivePolicy, required_costs
from specpolicy.plugins.verify_rules import most_tokens_per_second
from specpolicy.policy import Answers, LearnedPolicy, Plan, PromptObservation, TrainingSet

SETTINGS_NAME = "verify_head.json"


def position_features(confidences: Sequence[float]) -> np.ndarray:
    """Features of every draft of one block, float32 [B - 1, 5]: confidence, log running product,
    previous confidence, position / 32, block size / 32."""
    c = np.clip(np.asarray(confidences, dtype=np.float64), 1e-6, 1.0)
    n = len(c)
    block = n + 1
    previous = np.concatenate([[1.0], c[:-1]]) if n else c
    return np.stack([c, np.cumsum(np.log(c)), previous, np.arange(1, n + 1) / 32, np.full(n, block / 32)],
                    axis=1).astype(np.float32) if n else np.zeros((0, 5), np.float32)


def training_samples(tables: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, 5], passed [n]) over every drafted position whose earlier drafts all passed."""
    xs, ys = [], []
    for table in tables:
        for size, confidences in table.confidences.items():
            column = table.candidates.index(size)
            for i in np.flatnonzero(~np.isnan(confidences[:, 0])):
                accepted = int(table.accepted[i, column])
                reached = min(accepted + 1, size - 1)  # positions 1..reached were tested (the first failure too)
                xs.append(position_features(confidences[i])[:reached])
                ys.append(np.arange(1, reached + 1) <= accepted)
    if not xs:
        raise ValueError("no recorded confidences to learn from; sweep with --verify-lengths --confidences ...")
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64)


class VerifyHeadPolicy(LearnedPolicy, AdaptivePolicy):
    """``adaptive``'s block size, then the L with the most expected tokens per second under calibrated
    acceptance probabilities."""

    def __init__(self, candidates: Sequence[int], model: object | None = None) -> None:
        AdaptivePolicy.__init__(self, candidates)
        self.model = model

    def confidence_sizes(self) -> set[int]:
        return {b for b in self.candidates if b > 1}

    def probabilities(self, confidences: Sequence[float]) -> np.ndarray:
        """P(draft k passes | drafts before it passed) for every draft of the block, [B - 1]."""
        logits = position_features(confidences) @ self.model.coef_[0] + self.model.intercept_[0]
        return 1.0 / (1.0 + np.exp(-logits))

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """``adaptive``'s block sizes; L from the calibrated acceptance probabilities of the drafted block."""
        if self.model is None:
            raise ValueError("this verify head is untrained; `specpolicy train verify-head --sweep DIR --out FOLDER`")
        costs = required_costs(self, observation)
        return super().plan(observation).with_length(lambda state, drafted: most_tokens_per_second(
            self.probabilities(drafted.confidences).tolist(), drafted.block_size, costs))

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0) -> dict:
        """Logistic regression of 'draft passes' on the position features of the training replays."""
        from sklearn.linear_model import LogisticRegression

        tables = [t for t in (dataset.episodes or []) if t is not None and t.confidences]
        x, y = training_samples(tables)
        self.model = LogisticRegression(max_iter=1000, random_state=seed).fit(x, y)
        summary = {"prompts": len(tables), "samples": len(y), "pass_rate": float(y.mean())}
        if validation is not None and validation.episodes:
            vx, vy = training_samples([t for t in validation.episodes if t is not None and t.confidences])
            summary["validation_log_loss"] = float(_log_loss(vy, self.model.predict_proba(vx)[:, 1]))
            summary["validation_raw_confidence_log_loss"] = float(_log_loss(vy, vx[:, 0]))
        return summary

    def save(self, path: str | Path) -> None:
        skops_io.save_model(path, self.model, SETTINGS_NAME, {"candidates": list(self.candidates)})

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> VerifyHeadPolicy:
        model, settings = skops_io.load_model(path, SETTINGS_NAME, "verify head",
                                              "specpolicy train verify-head --sweep DIR --out FOLDER")
        return cls(candidates or settings["candidates"], model)


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def verify_head_policy(arg: str | None, candidates: Sequence[int]) -> VerifyHeadPolicy:
    if not arg:
        raise ValueError("verify-head needs a trained head: verify-head:FOLDER (train one with "
                         "`specpolicy train verify-head --sweep DIR --out FOLDER`)")
    return VerifyHeadPolicy.load(Path(arg).expanduser(), candidates)


def untrained_verify_head(candidates: Sequence[int], dataset: TrainingSet, options: dict) -> VerifyHeadPolicy:
    return VerifyHeadPolicy(candidates)
