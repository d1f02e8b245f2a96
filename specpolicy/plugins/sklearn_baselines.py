"""scikit-learn baselines on compact prefill features plus 16 principal components of the logits: ``forest``,
``knn`` and ``gboost`` regress cycles per token, ``logreg`` classifies; saved with skops (no pickle)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import MultiOutputRegressor
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from specpolicy.costs import CostTable
from specpolicy.features import compact_from_augmented, logits_from_augmented, with_lengths
from specpolicy.plugins import skops_io
from specpolicy.policy import LearnedPolicy, PromptObservation, TrainingSet

SETTINGS_NAME = "sklearn.json"

CLASSIFIERS: dict[str, Callable[[int], object]] = {
    "logreg": lambda seed: LogisticRegression(max_iter=2000, C=1.0),
}
REGRESSORS: dict[str, Callable[[int], object]] = {
    "forest": lambda seed: RandomForestRegressor(n_estimators=300, min_samples_leaf=5, random_state=seed),
    "knn": lambda seed: KNeighborsRegressor(n_neighbors=15),
    "gboost": lambda seed: MultiOutputRegressor(
        HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05, random_state=seed)),
}
KINDS = CLASSIFIERS | REGRESSORS


def make_model(kind: str, n_samples: int, seed: int = 0) -> Pipeline:
    """Features (compact + PCA of logits), scaler and the classifier or regressor ``kind``."""
    components = max(1, min(16, n_samples - 1))
    features = FeatureUnion([
        ("compact", FunctionTransformer(compact_from_augmented)),
        ("pca",
         make_pipeline(FunctionTransformer(logits_from_augmented), PCA(components, random_state=seed))),
    ])
    return Pipeline([("features", features), ("scale", StandardScaler()), ("classifier", KINDS[kind](seed))])


class SklearnPolicy(LearnedPolicy):
    """A scikit-learn regressor of cycles per token (priced with the machine's table) or a classifier."""

    def __init__(self, kind: str, candidates: Sequence[int], model: Pipeline | None = None,
                 validated_with: CostTable | None = None) -> None:
        super().__init__(candidates)
        if kind not in KINDS:
            raise ValueError(f"unknown sklearn baseline {kind!r}; use one of {', '.join(KINDS)}")
        self.kind = kind
        self.model = model
        self.validated_with = validated_with

    @property
    def predicts(self) -> str:
        return "label" if self.kind in CLASSIFIERS else "cycles_per_token"

    def vocabulary(self) -> int | None:
        fitted = getattr(self.model, "n_features_in_", None)  # the logits plus the prompt-length column
        return None if fitted is None else int(fitted) - 1

    def choose(self, logits: np.ndarray, lengths: np.ndarray,
               tables: Sequence[CostTable | None]) -> np.ndarray:
        """Candidate indices [n] for logits [n, V] and prompt lengths [n]."""
        if self.model is None:
            raise ValueError(f"{self.kind} is not trained; run `specpolicy train {self.kind} --sweep DIR "
                             f"--out PATH` and use {self.kind}:PATH")
        predicted = np.asarray(self.model.predict(with_lengths(logits, lengths)))
        if self.predicts == "label":
            return predicted.astype(np.int64)
        return np.array([self.candidates.index(b) for b in self.fastest_choices(predicted, tables)],
                        dtype=np.int64)

    def select(self, observation: PromptObservation) -> int:
        return self.select_batch([observation])[0]

    def select_batch(self, observations: Sequence[PromptObservation]) -> list[int]:
        logits = np.stack([o.logits for o in observations])
        lengths = np.array([o.prompt_length for o in observations])
        return [self.candidates[i] for i in self.choose(logits, lengths, [o.costs for o in observations])]

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0) -> dict:
        """Fit the pipeline to the labels (``logreg``) or to the cycles per token (the regressors)."""
        if tuple(dataset.candidates) != self.candidates:
            raise ValueError(f"training set candidates {list(dataset.candidates)} differ from "
                             f"{list(self.candidates)}")
        dataset.prefill_features()
        if self.predicts == "label" and len(np.unique(dataset.labels)) < 2:
            only = dataset.candidates[int(dataset.labels[0])]
            raise ValueError(f"every training prompt has the same label (block size {only}); fixed{only} "
                             "does the same without training, or sweep more varied prompts")
        targets = dataset.labels if self.predicts == "label" else dataset.cycles_per_token
        self.model = make_model(self.kind, len(dataset), seed)
        self.model.fit(with_lengths(dataset.logits, dataset.prompt_lengths), targets)
        checked = validation if validation is not None and len(validation) else dataset
        self.validated_with = checked.costs if self.predicts == "cycles_per_token" else None
        summary = {"predicts": self.predicts, "train_accuracy": self.accuracy(dataset)}
        if validation is not None and len(validation):
            summary["validation_accuracy"] = self.accuracy(validation)
        return summary

    def accuracy(self, dataset: TrainingSet) -> float:
        """Share of prompts whose choice (priced with the set's table) equals the label."""
        chosen = self.choose(dataset.logits, dataset.prompt_lengths, [dataset.costs] * len(dataset))
        return float((chosen == dataset.labels).mean())

    def save(self, path: str | Path) -> None:
        skops_io.save_model(path, self.model, SETTINGS_NAME, self.with_validated(
            {"kind": self.kind, "candidates": list(self.candidates), "predicts": self.predicts}))

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> SklearnPolicy:
        model, settings = skops_io.load_model(path, SETTINGS_NAME, "sklearn policy",
                                              "specpolicy train KIND --sweep DIR --out FOLDER")
        policy = cls(settings["kind"], settings["candidates"], model, cls.validated_from(settings))
        if settings.get("predicts", "label") != policy.predicts:
            raise ValueError(f"the {settings['kind']} policy in {path} was saved as a classifier before it "
                             "became a regressor of cycles per token; retrain it with `specpolicy train "
                             f"{settings['kind']} --sweep DIR --out {path}`")
        return policy


def sklearn_policy(kind: str, arg: str | None, candidates: Sequence[int]) -> SklearnPolicy:
    """A fitted baseline from ``arg`` (a folder), or an untrained one of ``kind``."""
    return SklearnPolicy.load(arg, candidates) if arg else SklearnPolicy(kind, candidates)


logreg_policy = partial(sklearn_policy, "logreg")
forest_policy = partial(sklearn_policy, "forest")
knn_policy = partial(sklearn_policy, "knn")
gboost_policy = partial(sklearn_policy, "gboost")
