"""Oracles from a sweep: the best block size per prompt, or per cycle from exact replay."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.decoding import DecodeState
from specpolicy.hookspecs import hookimpl
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation, oracle_label


def _record(observation: PromptObservation, name: str) -> dict:
    if observation.record is None:
        raise ValueError(f"{name} reads the sweep store; evaluate it with --mode replay (or --sweep DIR)")
    return observation.record


class OraclePolicy(Policy):
    """Per prompt, the candidate with the highest tau (ties: nearest the training block size)."""

    needs_sweep = True

    def __init__(self, candidates: Sequence[int], training_block_size: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.training_block_size = training_block_size

    def select(self, observation: PromptObservation) -> int:
        taus = _record(observation, "oracle")["taus"]
        missing = [b for b in self.candidates if str(b) not in taus]
        if missing:
            raise ValueError(f"the sweep has no tau for block sizes {missing}; sweep them or pass --candidates "
                             f"{','.join(sorted(taus, key=int))}")
        values = [taus[str(b)] for b in self.candidates]
        training = int(observation.record.get("training_block_size", self.training_block_size))
        return self.candidates[oracle_label(values, self.candidates, training)]


class StepOraclePolicy(OraclePolicy):
    """Per cycle, the block sizes that finish the output in the fewest cycles (from exact replay)."""

    per_step = True

    def _schedule(self, observation: PromptObservation) -> list[int]:
        record = _record(observation, "oracle-step")
        cached = record.get("_oracle_step_schedule")
        if cached is None:
            from specpolicy.sweep.replay import ReplayTable

            table = ReplayTable.from_record(record)
            training = int(record.get("training_block_size", self.training_block_size))
            cached = record["_oracle_step_schedule"] = table.per_cycle_oracle(training)
        return cached

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        schedule = self._schedule(observation)
        return schedule[state.cycle] if state.cycle < len(schedule) else schedule[-1]


@hookimpl
def register_policies(register) -> None:
    register("oracle", lambda arg, candidates: OraclePolicy(candidates),
             description="per prompt, the best candidate in the sweep (an upper bound, not deployable)")
    register("oracle-step", lambda arg, candidates: StepOraclePolicy(candidates), per_step=True,
             description="per cycle, the best candidates from exact replay (an upper bound)")
