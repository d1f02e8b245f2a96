"""Oracles from a sweep (upper bounds, not deployable): the fastest block size per prompt or per cycle.

``oracle``: per prompt, the candidate with the fewest modelled seconds (the highest tau when the
sweep has no cost table). ``oracle-tau``: per prompt, the highest tau (BlockPilot's label).
``oracle-step``: per cycle, the fewest modelled seconds by exact dynamic programming over the replay.
"""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.hookspecs import hookimpl
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation, oracle_label
from specpolicy.state import DecodeState


def _record(observation: PromptObservation, name: str) -> dict:
    if observation.record is None:
        raise ValueError(f"{name} reads the sweep store; evaluate it with --mode replay (or --sweep DIR)")
    return observation.record


def _training(observation: PromptObservation, default: int) -> int:
    return int(_record(observation, "oracle").get("training_block_size", default))


def _table(observation: PromptObservation, name: str):
    from specpolicy.replay_table import ReplayTable

    return ReplayTable.from_record(_record(observation, name))


class TauOraclePolicy(Policy):
    """Per prompt, the candidate with the highest tau (ties: nearest the training block size)."""

    needs_sweep = True

    def __init__(self, candidates: Sequence[int], training_block_size: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.training_block_size = training_block_size

    def select(self, observation: PromptObservation) -> int:
        taus = _record(observation, self.name)["taus"]
        missing = [b for b in self.candidates if str(b) not in taus]
        if missing:
            raise ValueError(f"the sweep has no tau for block sizes {missing}; sweep them or pass --candidates "
                             f"{','.join(sorted(taus, key=int))}")
        values = [taus[str(b)] for b in self.candidates]
        training = _training(observation, self.training_block_size)
        return self.candidates[oracle_label(values, self.candidates, training)]


class TimeOraclePolicy(TauOraclePolicy):
    """Per prompt, the candidate with the fewest modelled seconds (the tau oracle without a cost table)."""

    def select(self, observation: PromptObservation) -> int:
        if observation.costs is None or "replay" not in _record(observation, self.name):
            return super().select(observation)
        return _table(observation, self.name).fastest_fixed(observation.costs, self.candidates,
                                                             _training(observation, self.training_block_size))


class StepOraclePolicy(TauOraclePolicy):
    """Per cycle, the schedule with the fewest modelled seconds (fewest cycles without a cost table)."""

    per_step = True

    def schedule(self, observation: PromptObservation):
        plan = _table(observation, self.name).per_cycle_oracle(
            observation.costs, self.candidates, _training(observation, self.training_block_size))
        return lambda state: plan[state.cycle] if state.cycle < len(plan) else plan[-1]

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        return self.schedule(observation)(state)


@hookimpl
def register_policies(register) -> None:
    register("oracle", lambda arg, candidates: TimeOraclePolicy(candidates),
             description="per prompt, the fastest candidate by modelled time (an upper bound, not deployable)")
    register("oracle-tau", lambda arg, candidates: TauOraclePolicy(candidates),
             description="per prompt, the candidate with the highest tau (BlockPilot's label; not deployable)")
    register("oracle-step", lambda arg, candidates: StepOraclePolicy(candidates), per_step=True,
             description="per cycle, the fewest modelled seconds by exact dynamic programming (an upper bound)")
