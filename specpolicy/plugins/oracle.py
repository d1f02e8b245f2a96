"""Oracles from a sweep (upper bounds, not deployable): ``oracle`` (per prompt, the fewest seconds; the
highest tau without a cost table), ``oracle-tau`` (BlockPilot's label) and ``oracle-step`` (per cycle, exact
dynamic programming)."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.arguments import check_no_argument
from specpolicy.costs import CostTable
from specpolicy.policy import TRAINING_BLOCK_SIZE, Answers, Plan, Policy, PromptObservation
from specpolicy.replay.schedules import oracle_plans


class TauOraclePolicy(Policy):
    """Per prompt, the candidate with the highest tau (ties: nearest the training block size)."""

    needs_sweep = True

    def __init__(self, candidates: Sequence[int], training_block_size: int = TRAINING_BLOCK_SIZE) -> None:
        super().__init__(candidates)
        self.training_block_size = training_block_size

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        if answers is None:
            return super().plan(observation, answers)  # refuses: an oracle plans from a sweep's answers
        return Plan.fixed(self.best(answers, observation.costs))

    def lockstep_rules(self, answers: Sequence[Answers], costs: CostTable | None) -> list[object | None]:
        return [Plan.fixed(self.best(a, costs)).block for a in answers]

    def best(self, answers: Answers, costs: CostTable | None) -> int:
        """The prompt's best candidate by tau."""
        return answers.best_tau(self.candidates)


class TimeOraclePolicy(TauOraclePolicy):
    """Per prompt, the candidate with the fewest modelled seconds (the tau oracle without a cost table)."""

    def best(self, answers: Answers, costs: CostTable | None) -> int:
        """The prompt's fastest candidate (:meth:`Answers.fastest`: measured live; else by tau or replay)."""
        return answers.fastest(self.candidates, costs)


class StepOraclePolicy(TauOraclePolicy):
    """Per cycle, the schedule with the fewest modelled seconds (fewest cycles without a cost table)."""

    per_step = True

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        if answers is None or answers.table is None:
            raise ValueError(f"{self.name} needs a replay sweep (specpolicy sweep --mode replay)")
        return oracle_plans([answers.table], observation.costs, self.candidates,
                            answers.training_block_size)[0]

    def lockstep_rules(self, answers: Sequence[Answers], costs: CostTable | None) -> list[object | None]:
        """Every prompt's optimum by one dynamic programme over all (:func:`oracle_plans`)."""
        sizes = {a.training_block_size for a in answers}
        if len(sizes) != 1 or any(a.table is None for a in answers):
            return Policy.lockstep_rules(self, answers, costs)  # walked
        plans = oracle_plans([a.table for a in answers], costs, self.candidates, sizes.pop())
        return [p.block if p.length is None and (p.always or p.block.actions) else None for p in plans]


def time_oracle(arg: str | None, candidates: Sequence[int]) -> TimeOraclePolicy:
    check_no_argument(arg, "an oracle")
    return TimeOraclePolicy(candidates)


def tau_oracle(arg: str | None, candidates: Sequence[int]) -> TauOraclePolicy:
    check_no_argument(arg, "an oracle")
    return TauOraclePolicy(candidates)


def step_oracle(arg: str | None, candidates: Sequence[int]) -> StepOraclePolicy:
    check_no_argument(arg, "an oracle")
    return StepOraclePolicy(candidates)
