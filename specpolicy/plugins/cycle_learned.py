"""A learned per-cycle policy (``cycle``): an MLP predicts from the cycles so far the tokens each candidate
would commit next, priced with the observation's cost table; trained by DAgger rounds on replay tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specpolicy.costs import CostTable, cheapest, uniform_costs
from specpolicy.cycles import Plan
from specpolicy.defaults import ACCEPTANCE_PRIOR, ACCEPTANCE_PRIOR_WEIGHT, DAGGER_ROUNDS, TRAINING_BLOCK_SIZE
from specpolicy.plugins import skops_io
from specpolicy.plugins.cycle_rules import snap
from specpolicy.policy import Answers, LearnedPolicy, PromptObservation, TrainingSet
from specpolicy.replay.lanes import Lane, State, acceptance_rate, fold_acceptance, lane_block, lane_state
from specpolicy.state import DecodeState

HISTORY = 6  # cycles of history in the features
SETTINGS_NAME = "cycle_policy.json"
FEATURE_DECAYS = (0.5, 0.8, 0.95)  # the decays of the acceptance rates in the features


def mlp_outputs(model: Any, features: np.ndarray) -> np.ndarray:
    """A trained MLP's outputs [n, C] for features [n, F] (its forward, in numpy): each row as it is alone
    (einsum sums every row in one order; a BLAS product of many rows can differ in the last bits)."""
    h = features
    for i, (weight, bias) in enumerate(zip(model.coefs_, model.intercepts_)):
        h = np.einsum("nf,fh->nh", h, weight)
        h += bias
        if i < len(model.coefs_) - 1:
            np.maximum(h, 0.0, out=h)
    return h


@dataclass(frozen=True)
class CycleRule:
    """The learned per-cycle rule as a value over lanes: from the features of the cycles so far
    (:meth:`features`), the MLP's predicted tokens of each candidate, the block with the most per second at
    ``seconds`` (``regret``: the least predicted regret); ``start_block`` first."""

    start_block: int
    candidates: tuple[int, ...]  # the MLP's outputs
    offered: tuple[int, ...]  # the columns it may choose (a restricted policy's)
    seconds: tuple[float, ...]  # a cycle's seconds at each offered block
    regret: bool
    model: Any = field(compare=False, repr=False, metadata={"shared": True})  # one MLP for every lane
    reads_time, LANES = False, True

    def __call__(self, state: DecodeState) -> int:
        return lane_block(self, state, lambda b, n: 0.0)[1]

    def choices(self) -> set[int]:
        return {*np.ravel(self.candidates if np.any(self.regret) else self.offered).tolist(),
                *np.ravel(self.start_block).tolist()}

    def start(self, prompt_length: np.ndarray) -> State:
        n = len(prompt_length)
        return State(recent=np.zeros((n, HISTORY, 4)), successes=np.zeros((n, 3)), trials=np.zeros((n, 3)),
                     cycles=np.zeros(n, np.int64), speculative=np.full(n, -1), good=np.full(n, -1))

    def update(self, s: State, length: Lane, accepted: Lane, seconds: Lane, block: Lane) -> None:
        drafted = block > 1
        row = np.stack([np.where(drafted, accepted / np.maximum(block - 1, 1), 0.0),
                        drafted & (accepted == block - 1), block / 32, block == 1], axis=1)
        s.recent = np.concatenate([row[:, None], s.recent[:, :-1]], axis=1)  # the newest first
        fold_acceptance(s, length, accepted, np.array(FEATURE_DECAYS))
        s.speculative = np.where(drafted, s.cycles, s.speculative)
        s.good = np.where(drafted & (accepted >= 2), s.cycles, s.good)
        s.cycles = s.cycles + 1

    def features(self, s: State) -> np.ndarray:
        """Features of the cycles so far, float32 [lanes, 4 * HISTORY + 6]: per recent cycle (newest first,
        zero-padded) accepted share, full-accept flag, B / 32, B = 1 flag; then acceptance at three decays,
        the trailing AR run, cycles since the last good speculative cycle and the cycle count (all / 16)."""
        last = s.cycles[:, None] - 1 - np.stack([s.speculative, s.good], axis=1)
        rates = acceptance_rate(s, ACCEPTANCE_PRIOR, ACCEPTANCE_PRIOR_WEIGHT)
        return np.concatenate([s.recent.reshape(len(s.cycles), -1), rates, last / 16, s.cycles[:, None] / 16],
                              1).astype(np.float32)

    def block(self, s: State, batch: int) -> np.ndarray:
        n = len(s.cycles)
        if not s.cycles.any():
            return np.zeros(n, np.int64) + self.start_block
        if self.model is None:
            raise ValueError("this cycle policy is untrained; `specpolicy train cycle --sweep DIR --out "
                             "FOLDER`")
        out, lane = mlp_outputs(self.model, self.features(s)), np.arange(n)
        candidates, offered = (np.broadcast_to(x, (n, np.shape(x)[-1])) for x in (self.candidates,
                                                                                  self.offered))
        columns = (candidates[:, None, :] == offered[:, :, None]).argmax(-1)
        cost = np.take_along_axis(1.0 / np.maximum(out, 1.0), columns, 1) * np.asarray(self.seconds)
        fastest = offered[lane, cheapest(cost)]
        chosen = np.where(self.regret, candidates[lane, np.argmin(out, axis=1)], fastest)
        return np.where(s.cycles == 0, self.start_block, chosen)


class CycleLearnedPolicy(LearnedPolicy):
    """Per cycle: the block size with the most predicted tokens per second (``predicts="committed"``), or
    the least predicted regret of an older predictor (``predicts="regret"``)."""

    per_step = True

    def __init__(self, candidates: Sequence[int], model: Any = None, start: int = TRAINING_BLOCK_SIZE,
                 predicts: str = "committed", validated_with: CostTable | None = None) -> None:
        super().__init__(candidates)
        self.model, self.start, self.predicts = model, snap(start, self.candidates), predicts
        self.validated_with = validated_with

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        return Plan(self.rule(observation.costs))

    def rule(self, costs: CostTable | None) -> CycleRule:
        """This policy as a value, priced with ``costs`` (else the table it was validated with)."""
        offered, table = self.allowed or self.candidates, costs or self.validated_with or uniform_costs(
            self.candidates)
        return CycleRule(self.start, self.candidates, offered, tuple(table.cycle_seconds(b) for b in offered),
                         self.predicts == "regret", self.model)

    # --- training -------------------------------------------------------------------------------

    def _visit(self, table, use_policy: bool, costs: CostTable) -> list[tuple[np.ndarray, np.ndarray]]:
        """(features, tokens [C] each candidate commits next) at every anchor one rollout visits: of the
        current policy, or (first round) of a schedule cycling through the candidates."""
        samples, session, rule = [], table.session(), self.rule(costs)
        while not session.done:
            state = session.state
            if state.block_size_history:
                committed = [table.cycle(session.position, state.generated, b)[0].committed
                             for b in self.candidates]
                features = rule.features(lane_state(rule, state, lambda b, n: 0.0))[0]
                samples.append((features, np.asarray(committed, np.float32)))
            if use_policy:
                size = rule(state)
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
