"""A learned per-cycle policy: imitates the per-cycle time oracle with DAgger, on cycle-history features.

Training needs replay tables and a cost table (a replay sweep). The exact dynamic programming of
:meth:`~specpolicy.sweep.replay.ReplayTable.cost_to_go` gives, at every anchor, the modelled seconds
to finish after each possible next block size (q). A regressor learns each block
size's regret (q - the best q, in AR steps) from features of the cycles so far (one small MLP with an
output per block size, evaluated in numpy: a few microseconds per cycle); the policy picks the least
predicted regret. Rounds of DAgger roll the current policy out on the training prompts and add
the states it visits, labelled by the oracle, so it learns to recover from its own mistakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specpolicy import skops_io
from specpolicy.defaults import DAGGER_ROUNDS, TRAINING_BLOCK_SIZE
from specpolicy.plugins.cycle_rules import acceptance_rate
from specpolicy.policy import LearnedPolicy, PromptObservation, TrainingSet
from specpolicy.state import DecodeState

HISTORY = 6
"""cycles of history in the features"""
SETTINGS_NAME = "cycle_policy.json"


def cycle_features(state: DecodeState) -> np.ndarray:
    """Features of the cycles so far: float32 [4 * HISTORY + 6].

    Per recent cycle (newest first, zero-padded): accepted share of the drafts, full-accept flag,
    B / 32, B = 1 flag. Then acceptance rates at three decays, the trailing run of AR cycles, cycles
    since the last speculative cycle with >= 2 accepted, and the number of cycles so far (all / 16).
    """
    sizes, accepted = state.block_size_history, state.accepted_history
    rows = []
    for k in range(1, HISTORY + 1):
        if k <= len(sizes):
            b, a = sizes[-k], accepted[-k]
            rows += [a / (b - 1) if b > 1 else 0.0, float(b > 1 and a == b - 1), b / 32, float(b == 1)]
        else:
            rows += [0.0, 0.0, 0.0, 0.0]
    rates = [acceptance_rate(state, decay=decay) for decay in (0.5, 0.8, 0.95)]
    trailing_ar = next((i for i, b in enumerate(reversed(sizes)) if b != 1), len(sizes))
    since_good = next((i for i, (b, a) in enumerate(zip(reversed(sizes), reversed(accepted))) if b > 1 and a >= 2),
                      len(sizes))
    return np.array(rows + rates + [trailing_ar / 16, since_good / 16, len(sizes) / 16], dtype=np.float32)


class CycleLearnedPolicy(LearnedPolicy):
    """Per cycle: the block size with the least predicted regret against the per-cycle time oracle."""

    per_step = True

    def __init__(self, candidates: Sequence[int], model: object | None = None,
                 start: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.model = model
        self.start = start

    def regrets(self, features: np.ndarray) -> np.ndarray:
        """Predicted regret of every candidate [n, C] from features [n, F] (the MLP's forward, in numpy)."""
        h = features
        for i, (weight, bias) in enumerate(zip(self.model.coefs_, self.model.intercepts_)):
            h = h @ weight + bias
            if i < len(self.model.coefs_) - 1:
                h = np.maximum(h, 0.0)
        return h

    def select(self, observation: PromptObservation) -> int:
        return self.start

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        if not state.block_size_history:
            return self.start
        if self.model is None:
            raise ValueError("this cycle policy is untrained; `specpolicy train cycle --sweep DIR --out FOLDER`")
        return self.candidates[int(np.argmin(self.regrets(cycle_features(state)[None])[0]))]

    # --- training -------------------------------------------------------------------------------

    def _visit(self, table, q: np.ndarray, order: list[int], use_policy: bool) -> list[tuple[np.ndarray, np.ndarray]]:
        """(features, regrets [C] in the candidates' order) at every anchor one rollout visits."""
        samples = []
        p = table.prompt_length
        session = table.session()
        while not session.done:
            regret = (q[session.position - p] - q[session.position - p].min())[order]
            state = session.state
            if state.block_size_history:
                samples.append((cycle_features(state), regret))
            if use_policy or not state.block_size_history:
                size = self.step(state, PromptObservation(np.zeros(0, np.float32), p)) if use_policy else self.start
            else:
                size = self.candidates[int(np.argmin(regret))]
            session.step(size)
        return samples

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0,
            rounds: int = DAGGER_ROUNDS) -> dict:
        """Imitate the per-cycle time oracle on ``dataset.episodes`` priced with ``dataset.costs`` (DAgger)."""
        from sklearn.neural_network import MLPRegressor

        if not dataset.episodes or dataset.costs is None:
            raise ValueError("the cycle policy trains on replay tables with a cost table; train it from a replay "
                             "sweep with latency.json (specpolicy sweep --mode replay)")
        costs = dataset.costs
        tables = [t for t in dataset.episodes if t is not None]
        prepared = []
        for table in tables:
            _, q, sizes = table.cost_to_go(costs, self.candidates)
            prepared.append((table, q / costs.ar_seconds, [sizes.index(b) for b in self.candidates]))
        xs, ys = [], []
        history = []
        for round_ in range(rounds + 1):
            for table, q, order in prepared:
                for x, y in self._visit(table, q, order, use_policy=round_ > 0):
                    xs.append(x)
                    ys.append(y)
            x_all, y_all = np.stack(xs), np.stack(ys)
            self.model = MLPRegressor(hidden_layer_sizes=(64, 64), learning_rate_init=3e-3, max_iter=300,
                                      early_stopping=True, random_state=seed).fit(x_all, np.minimum(y_all, 10.0))
            history.append({"round": round_, "samples": len(xs)})
        return {"rounds": rounds, "samples": len(xs), "history": history, "prompts": len(tables)}

    # --- persistence ----------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        skops_io.save_model(path, self.model, SETTINGS_NAME,
                            {"candidates": list(self.candidates), "start": self.start, "history": HISTORY})

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> CycleLearnedPolicy:
        model, settings = skops_io.load_model(path, SETTINGS_NAME, "cycle policy",
                                              "specpolicy train cycle --sweep DIR --out FOLDER")
        return cls(settings["candidates"], model, settings["start"])


def cycle_policy(arg: str | None, candidates: Sequence[int]) -> CycleLearnedPolicy:
    if arg:
        return CycleLearnedPolicy.load(Path(arg).expanduser(), candidates)
    from specpolicy.zoo import ZOO_DIR

    return CycleLearnedPolicy.load(ZOO_DIR / "cycle", candidates)


def untrained_cycle_policy(candidates: Sequence[int], dataset: TrainingSet, options: dict) -> CycleLearnedPolicy:
    return CycleLearnedPolicy(candidates)
