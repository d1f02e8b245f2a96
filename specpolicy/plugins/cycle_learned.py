"""A learned per-cycle policy (``cycle``): an MLP predicts from the cycles so far the tokens each candidate
would commit next, priced with the observation's cost table; trained by DAgger rounds on replay tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.defaults import DAGGER_ROUNDS, TRAINING_BLOCK_SIZE
from specpolicy.plugins import skops_io
from specpolicy.plugins.cycle_rules import acceptance_rates, snap
from specpolicy.policy import LearnedPolicy, PromptObservation, TrainingSet
from specpolicy.state import DecodeState

HISTORY = 6
"""cycles of history in the features"""
SETTINGS_NAME = "cycle_policy.json"
FEATURE_DECAYS = (0.5, 0.8, 0.95)
"""the decays of the acceptance rates in the features"""


def cycle_features(state: DecodeState) -> np.ndarray:
    """Features of the cycles so far, float32 [4 * HISTORY + 6]: per recent cycle (newest first, zero-padded)
    accepted share, full-accept flag, B / 32, B = 1 flag; then acceptance at three decays, the trailing AR
    run, cycles since the last good speculative cycle and the cycle count (all / 16)."""
    sizes, accepted = state.block_size_history, state.accepted_history
    rows: list[float] = []
    for b, a in zip(sizes[: -HISTORY - 1 : -1], accepted[: -HISTORY - 1 : -1]):  # the newest first
        rows += (a / (b - 1) if b > 1 else 0.0, float(b > 1 and a == b - 1), b / 32, float(b == 1))
    rows += [0.0] * (4 * HISTORY - len(rows))
    rates = acceptance_rates(state, FEATURE_DECAYS)
    speculative, good = _last_cycles(state)
    trailing_ar, since_good = len(sizes) - 1 - speculative, len(sizes) - 1 - good
    return np.array(rows + rates + [trailing_ar / 16, since_good / 16, len(sizes) / 16], dtype=np.float32)


def _last_cycles(state: DecodeState) -> tuple[int, int]:
    """(index of the last speculative cycle, of the last with >= 2 accepted; -1: none), a state fold."""
    def update(last: tuple[int, int], i: int) -> tuple[int, int]:
        if state.block_size_history[i] == 1:
            return last
        return i, i if state.accepted_history[i] >= 2 else last[1]

    return state.fold("_last_cycles", (-1, -1), update)


class CycleLearnedPolicy(LearnedPolicy):
    """Per cycle: the block size with the most predicted tokens per second (``predicts="committed"``), or
    the least predicted regret of an older predictor (``predicts="regret"``)."""

    per_step = True

    def __init__(self, candidates: Sequence[int], model: object | None = None,
                 start: int = TRAINING_BLOCK_SIZE,
                 predicts: str = "committed", validated_with: CostTable | None = None) -> None:
        super().__init__(candidates)
        self.model, self.start, self.predicts = model, snap(start, self.candidates), predicts
        self.validated_with = validated_with

    def outputs(self, features: np.ndarray) -> np.ndarray:
        """The MLP's outputs [n, C] for features [n, F], or [C] for [F] (its forward, in numpy)."""
        layers = len(self.model.coefs_)
        h = features
        for i, (weight, bias) in enumerate(zip(self.model.coefs_, self.model.intercepts_)):
            h = h @ weight
            h += bias
            if i < layers - 1:
                np.maximum(h, 0.0, out=h)
        return h

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        if not state.block_size_history:
            return self.start
        if self.model is None:
            raise ValueError("this cycle policy is untrained; `specpolicy train cycle --sweep DIR --out "
                             "FOLDER`")
        out = self.outputs(cycle_features(state))
        if self.predicts == "regret":
            return self.candidates[int(np.argmin(out))]
        return self.fastest_choice(1.0 / np.maximum(out, 1.0), observation.costs)

    # --- training -------------------------------------------------------------------------------

    def _visit(self, table, use_policy: bool, costs: CostTable) -> list[tuple[np.ndarray, np.ndarray]]:
        """(features, tokens [C] each candidate commits next) at every anchor one rollout visits: of the
        current policy, or (first round) of a schedule cycling through the candidates."""
        samples, session = [], table.session()
        observation = PromptObservation(np.zeros(0, np.float32), table.prompt_length, costs=costs)
        while not session.done:
            state = session.state
            if state.block_size_history:
                committed = [table.cycle(session.position, state.generated, b)[0].committed
                             for b in self.candidates]
                samples.append((cycle_features(state), np.asarray(committed, np.float32)))
            if use_policy:
                size = self.step(state, observation)
            else:
                size = self.candidates[len(state.block_size_history) % len(self.candidates)]
            session.step(size)
        return samples

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0,
            rounds: int = DAGGER_ROUNDS) -> dict:
        """Learn the tokens of every candidate's next cycle on ``dataset.episodes`` (DAgger rollouts priced
        with ``dataset.costs``, which the policy keeps for observations without a table)."""
        from sklearn.neural_network import MLPRegressor

        if not dataset.episodes or dataset.costs is None:
            raise ValueError("the cycle policy trains on replay tables with a cost table; train it from a "
                             "replay sweep with latency.json (specpolicy sweep --mode replay)")
        self.predicts, self.validated_with = "committed", dataset.costs
        tables = [t for t in dataset.episodes if t is not None]
        xs, ys, history = [], [], []
        for round_ in range(rounds + 1):
            for table in tables:
                for x, y in self._visit(table, use_policy=round_ > 0, costs=dataset.costs):
                    xs.append(x)
                    ys.append(y)
            self.model = MLPRegressor(hidden_layer_sizes=(64, 64), learning_rate_init=3e-3, max_iter=300,
                                      early_stopping=True, random_state=seed).fit(np.stack(xs), np.stack(ys))
            history.append({"round": round_, "samples": len(xs)})
        return {"rounds": rounds, "samples": len(xs), "history": history, "prompts": len(tables),
                "predicts": self.predicts, "validated_with": self.validated_with.to_json()}

    # --- persistence ----------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        skops_io.save_model(path, self.model, SETTINGS_NAME, self.with_validated(
            {"candidates": list(self.candidates), "start": self.start, "history": HISTORY,
             "predicts": self.predicts}),
            weights_only=True)

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> CycleLearnedPolicy:
        model, settings = skops_io.load_model(path, SETTINGS_NAME, "cycle policy",
                                              "specpolicy train cycle --sweep DIR --out FOLDER",
                                              weights_only=True)
        return cls(settings["candidates"], model, settings["start"], settings.get("predicts", "regret"),
                   cls.validated_from(settings))


def cycle_policy(arg: str | None, candidates: Sequence[int]) -> CycleLearnedPolicy:
    if arg:
        return CycleLearnedPolicy.load(Path(arg).expanduser(), candidates)
    from specpolicy.zoo import ZOO_DIR

    return CycleLearnedPolicy.load(ZOO_DIR / "cycle", candidates)


def untrained_cycle_policy(candidates: Sequence[int], dataset: TrainingSet,
                           options: dict) -> CycleLearnedPolicy:
    return CycleLearnedPolicy(candidates)
