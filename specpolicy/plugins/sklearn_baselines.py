"""scikit-learn baselines on compact prefill features plus a PCA of the logits.

Features: entropy, top-8 probabilities, margin, max logit, logsumexp, log prompt length
(:func:`specpolicy.features.compact`) and 16 principal components of the raw logits, standardised.
Saved with skops (no pickle); loading accepts only scikit-learn/numpy types and this project's
feature functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from specpolicy import skops_io
from specpolicy.features import compact_from_augmented, logits_from_augmented, with_lengths
from specpolicy.policy import LearnedPolicy, PromptObservation, TrainingSet

SETTINGS_NAME = "sklearn.json"

CLASSIFIERS: dict[str, Callable[[int], object]] = {
    "logreg": lambda seed: LogisticRegression(max_iter=2000, C=1.0),
    "forest": lambda seed: RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=seed),
    "knn": lambda seed: KNeighborsClassifier(n_neighbors=15),
    "gboost": lambda seed: HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=seed),
}


def make_model(kind: str, n_samples: int, seed: int = 0) -> Pipeline:
    """Features (compact + PCA of logits), scaler and the classifier ``kind``."""
    components = max(1, min(16, n_samples - 1))
    features = FeatureUnion([
        ("compact", FunctionTransformer(compact_from_augmented)),
        ("pca", make_pipeline(FunctionTransformer(logits_from_augmented), PCA(components, random_state=seed))),
    ])
    return Pipeline([("features", features), ("scale", StandardScaler()), ("classifier", CLASSIFIERS[kind](seed))])


class SklearnPolicy(LearnedPolicy):
    """A scikit-learn classifier over the candidates."""

    def __init__(self, kind: str, candidates: Sequence[int], model: Pipeline | None = None) -> None:
        super().__init__(candidates)
        if kind not in CLASSIFIERS:
            raise ValueError(f"unknown sklearn baseline {kind!r}; use one of {', '.join(CLASSIFIERS)}")
        self.kind = kind
        self.model = model

    def vocabulary(self) -> int | None:
        fitted = getattr(self.model, "n_features_in_", None)  # the logits plus the prompt-length column
        return None if fitted is None else int(fitted) - 1

    def _predict_indices(self, logits: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise ValueError(f"{self.kind} is not trained; run `specpolicy train {self.kind} --sweep DIR --out PATH` "
                             f"and use {self.kind}:PATH")
        return np.asarray(self.model.predict(with_lengths(logits, lengths)), dtype=np.int64)

    def select(self, observation: PromptObservation) -> int:
        return self.select_batch([observation])[0]

    def select_batch(self, observations: Sequence[PromptObservation]) -> list[int]:
        logits = np.stack([o.logits for o in observations])
        lengths = np.array([o.prompt_length for o in observations])
        return [self.candidates[i] for i in self._predict_indices(logits, lengths)]

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0) -> dict:
        """Fit the pipeline (epochs, lr and friends do not apply)."""
        if tuple(dataset.candidates) != self.candidates:
            raise ValueError(f"training set candidates {list(dataset.candidates)} differ from {list(self.candidates)}")
        if len(np.unique(dataset.labels)) < 2:
            only = dataset.candidates[int(dataset.labels[0])]
            raise ValueError(f"every training prompt has the same label (block size {only}); fixed{only} does the "
                             "same without training, or sweep more varied prompts")
        self.model = make_model(self.kind, len(dataset), seed)
        self.model.fit(with_lengths(dataset.logits, dataset.prompt_lengths), dataset.labels)
        summary = {"train_accuracy": self.accuracy(dataset)}
        if validation is not None and len(validation):
            summary["validation_accuracy"] = self.accuracy(validation)
        return summary

    def accuracy(self, dataset: TrainingSet) -> float:
        predicted = self._predict_indices(dataset.logits, dataset.prompt_lengths)
        return float((predicted == dataset.labels).mean())

    def save(self, path: str | Path) -> None:
        skops_io.save_model(path, self.model, SETTINGS_NAME, {"kind": self.kind, "candidates": list(self.candidates)})

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> SklearnPolicy:
        model, settings = skops_io.load_model(path, SETTINGS_NAME, "sklearn policy",
                                              "specpolicy train KIND --sweep DIR --out FOLDER")
        return cls(settings["kind"], settings["candidates"], model)


def sklearn_policy(kind: str, arg: str | None, candidates: Sequence[int]) -> SklearnPolicy:
    """A fitted baseline from ``arg`` (a folder), or an untrained one of ``kind``."""
    return SklearnPolicy.load(arg, candidates) if arg else SklearnPolicy(kind, candidates)


logreg_policy = partial(sklearn_policy, "logreg")
forest_policy = partial(sklearn_policy, "forest")
knn_policy = partial(sklearn_policy, "knn")
gboost_policy = partial(sklearn_policy, "gboost")
