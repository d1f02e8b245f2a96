"""Verify-length policies: draft B, verify the first L <= B: ``threshold`` (running confidence >= 0.3),
``marginal`` (the most expected tokens per modelled second), ``adaptive-verify`` (``adaptive``'s B, then
``marginal``'s L) and ``oracle-verify`` (the exact (B, L) upper bound)."""

from __future__ import annotations

from collections.abc import Sequence

from specpolicy.arguments import check_no_argument, check_real
from specpolicy.costs import CostTable
from specpolicy.cycles import ConfidentPrefix, CostAwareLength, Plan
from specpolicy.plugins.cycle_rules import AdaptivePolicy, required_costs, start_block_size
from specpolicy.plugins.fixed import FixedPolicy
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.schedules import oracle_plans

DEFAULT_THRESHOLD = 0.3


def _largest(candidates: Sequence[int], arg: str | None) -> int:
    if arg is not None:
        if not arg.isdigit() or int(arg) not in candidates:
            raise ValueError(f"the argument is the drafted block size, one of {list(candidates)}; got "
                             f"{arg!r}")
        return int(arg)
    return max(candidates)


class ThresholdPolicy(FixedPolicy):
    """Draft a fixed B every cycle; verify while the running confidence stays above a threshold."""

    def __init__(self, candidates: Sequence[int], block_size: int, threshold: float = DEFAULT_THRESHOLD,
                 running: bool = True) -> None:
        super().__init__(block_size, candidates)
        check_real(threshold, "the threshold (a probability)", 0, 1)
        self.threshold, self.running = threshold, running

    def confidence_sizes(self) -> set[int]:
        return {self.block_size} if self.threshold > 0 else set()

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        if self.threshold == 0:  # nothing is ever cut: whole blocks, no confidences read
            return super().plan(observation)
        return super().plan(observation).with_length(ConfidentPrefix(self.threshold, self.running))


def marginal_length(costs: CostTable, blocks: Sequence[int]) -> CostAwareLength:
    """The marginal verify rule priced by ``costs`` for every drafted B of ``blocks`` (B > 1)."""
    return CostAwareLength(tuple((b, tuple(costs.split_cycle_seconds(b, n) for n in range(1, b + 1)))
                                 for b in sorted(set(blocks)) if b > 1))


class MarginalPolicy(ThresholdPolicy):
    """Draft a fixed B every cycle; verify the L with the most expected tokens per modelled second."""

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        costs = required_costs(self, observation)
        return Policy.plan(self, observation).with_length(marginal_length(costs, [self.block_size]))


class AdaptiveVerifyPolicy(AdaptivePolicy):
    """``adaptive``'s block size per cycle, then the marginal-cost verify length of what was drafted."""

    def confidence_sizes(self) -> set[int]:
        return {b for b in self.candidates if b > 1}

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        plan = super().plan(observation)  # plain decoding where adaptive's gate says so
        costs = required_costs(self, observation)
        return plan if plan.always == 1 else plan.with_length(marginal_length(costs, self.candidates))


class VerifyOraclePolicy(Policy):
    """Per cycle, the (B, L) with the fewest modelled seconds to finish (exact DP over the replay)."""

    needs_sweep = True
    per_step = True

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """(B, L) by anchor position, from the DP over this prompt's replay (L by position: no block read)."""
        if answers is None or answers.table is None or observation.costs is None:
            raise ValueError(f"{self.name} needs a replay sweep with --verify-lengths and a cost table "
                             "(--mode replay)")
        return oracle_plans([answers.table], observation.costs, self.candidates, verify_lengths=True)[0]


def threshold_policy(arg: str | None, candidates: Sequence[int]) -> ThresholdPolicy:
    if arg is not None and not arg.isdigit():
        try:
            return ThresholdPolicy(candidates, max(candidates), float(arg))
        except ValueError:
            raise ValueError("threshold's argument is a probability (threshold:0.5) or a block "
                             f"size (threshold16); got {arg!r}") from None
    return ThresholdPolicy(candidates, _largest(candidates, arg))


def marginal_policy(arg: str | None, candidates: Sequence[int]) -> MarginalPolicy:
    return MarginalPolicy(candidates, _largest(candidates, arg))


def adaptive_verify_policy(arg: str | None, candidates: Sequence[int]) -> AdaptiveVerifyPolicy:
    return AdaptiveVerifyPolicy(candidates, start_block_size(arg))


def verify_oracle(arg: str | None, candidates: Sequence[int]) -> VerifyOraclePolicy:
    check_no_argument(arg, "an oracle")
    return VerifyOraclePolicy(candidates)
