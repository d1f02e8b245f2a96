"""The policy contract: map what is known after prefill to a :class:`~specpolicy.cycles.Plan`
(:meth:`Policy.plan`; ``select`` and ``step`` follow an overridden ``plan``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from specpolicy.arguments import check_candidate_set
from specpolicy.costs import CostTable, uniform_costs
from specpolicy.cycles import Plan
from specpolicy.defaults import DEFAULT_CANDIDATES, TRAINING_BLOCK_SIZE
from specpolicy.state import DecodeState

__all__ = ["DEFAULT_CANDIDATES", "TRAINING_BLOCK_SIZE", "Answers", "DecodeState", "LearnedPolicy", "Plan",
           "Policy", "PromptObservation", "TrainingSet", "oracle_label"]


@dataclass
class PromptObservation:
    """What a per-prompt policy may read after prefill: ``logits`` float32 [V], ``costs`` (this machine's
    table or ``None``), ``concurrency``; what a sweep measured reaches oracles only, as :class:`Answers`."""

    logits: np.ndarray
    prompt_length: int
    prompt_id: str = ""
    costs: CostTable | None = field(default=None, repr=False)
    concurrency: int = 1


@dataclass(frozen=True)
class Answers:
    """What a sweep measured for one prompt, for oracles only: ``taus``, the replay ``table`` (``None`` for
    live or imported sweeps) and measured ``seconds_per_token`` (live sweeps)."""

    taus: Mapping[int, float]
    table: Any = None
    training_block_size: int = TRAINING_BLOCK_SIZE
    seconds_per_token: Mapping[int, float] | None = None

    def fastest_measured(self, candidates: Sequence[int]) -> int:
        """The candidate with the fewest measured seconds per token (ties: nearest the training size)."""
        values = [-self.seconds_per_token[b] for b in candidates]
        return candidates[oracle_label(values, candidates, self.training_block_size)]

    def best_tau(self, candidates: Sequence[int]) -> int:
        """The candidate with the highest tau (BlockPilot's label; ties: nearest the training size)."""
        missing = [b for b in candidates if b not in self.taus]
        if missing:
            raise ValueError(f"the sweep has no tau for block sizes {missing}; sweep them or pass "
                             f"--candidates {','.join(map(str, sorted(self.taus)))}")
        taus = [self.taus[b] for b in candidates]
        return candidates[oracle_label(taus, candidates, self.training_block_size)]

    def fastest(self, candidates: Sequence[int], costs: Any = None) -> int:
        """The per-prompt time oracle: fewest measured seconds, else modelled (``costs``), else best tau."""
        if self.seconds_per_token:
            return self.fastest_measured(candidates)
        if costs is not None and self.table is not None:
            return self.table.fastest_fixed(costs, candidates, self.training_block_size)
        return self.best_tau(candidates)


class Policy:
    """Base class. Subclasses override :meth:`select` (per prompt), :meth:`step` (per cycle, with
    ``per_step = True``) or, to set verify lengths or read a sweep's answers, :meth:`plan`."""

    name: str = "policy"
    per_step: bool = False
    needs_sweep: bool = False
    """True for oracles: they plan from what the sweep measured (the ``answers`` of :meth:`plan`)"""

    def __init__(self, candidates: Sequence[int] = DEFAULT_CANDIDATES) -> None:
        self.candidates = check_candidate_set(candidates)

    # --- the contract ---------------------------------------------------------------------------------

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """What the engines run for this prompt: :meth:`select`'s block size every cycle, or :meth:`step`
        before every cycle for ``per_step`` policies; whole blocks verified. Oracles read ``answers``."""
        if self.needs_sweep and answers is None:
            raise ValueError(f"{self.name} is an oracle: it plans from a sweep's measurements, so it runs in "
                             "replay only (--mode replay)")
        if not self.per_step:
            return Plan.fixed(self.select(observation))
        return Plan(lambda state: self.step(state, observation))

    def checked_plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        """:meth:`plan` as every engine runs it (live, replay, serving, transformers' ``generate``): a block
        size outside :meth:`choices` is refused, naming the policy, wherever the plan picks it."""
        plan, allowed = self.plan(observation, answers), self.choices()

        def block(state: DecodeState) -> int:
            size = plan.block(state)
            if size not in allowed:
                raise ValueError(f"policy {self.name!r} chose block size {size!r}, which is not among its "
                                 f"choices {sorted(allowed)}; fix its plan, or add {size!r} to its "
                                 "candidates")
            return size

        known = plan.known_sizes()
        if known is not None and known <= allowed:  # checked once: replay keeps the plan's value (its walk)
            return plan
        return replace(plan, block=block)

    def restrict(self, offered: Sequence[int]) -> Policy:
        """This policy choosing only among ``offered`` where its choices are learned; a rule is itself."""
        return self

    def select(self, observation: PromptObservation) -> int:
        """The block size for this prompt; a per-cycle policy's first (from its ``step``, or its ``plan``)."""
        first = DecodeState.after_prefill(observation.logits, observation.prompt_length)
        if self.per_step and type(self).step is not Policy.step:
            return self.step(first, observation)
        if type(self).plan is not Policy.plan:
            return self.plan(observation).block(first)
        raise NotImplementedError(f"{type(self).__name__} must define select (a per-prompt policy), step "
                                  "with per_step = True (a per-cycle one) or plan")

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        """The next cycle's block size: an overridden ``plan``'s, else the per-prompt choice."""
        if type(self).plan is not Policy.plan:
            return self.plan(observation).block(state)
        return self.select(observation)

    def choices(self) -> set[int]:
        """Every block size this policy may pick (a sweep must have recorded them all)."""
        return set(self.candidates)

    def vocabulary(self) -> int | None:
        """The logits width it reads (a learned policy's training vocabulary); ``None``: any target."""
        return None

    def engine_terms(self) -> str | None:
        """Its settings as its engine takes them (flags, config, constants); ``None``: no engine's."""
        return None

    def lockstep_rule(self, observation: PromptObservation | None = None) -> object | None:
        """The array rule (``LANES``) lockstep replay runs for it on the ``observation``'s prompt, stepped
        with every prompt's at once (replay.lockstep): its checked plan's, of whole blocks; else ``None``."""
        plan = observation and not self.needs_sweep and self.checked_plan(observation)
        return plan.block if plan and getattr(plan.block, "LANES", False) and plan.length is None else None

    def lockstep_rules(self, answers: Sequence[Answers], costs: CostTable | None) -> list[object | None]:
        """An oracle's :meth:`lockstep_rule` on every prompt at once, planned from what the sweep measured
        (``answers``), priced by ``costs``; ``None``: the prompt is walked."""
        return [None] * len(answers)

    def confidence_sizes(self) -> set[int]:
        """Block sizes whose drafts' confidences its verify lengths read (a sweep must record them)."""
        return set()

    # --- batch and stable-baselines3 interop ----------------------------------------------------------

    def select_batch(self, observations: Sequence[PromptObservation]) -> list[int]:
        """:meth:`select` for many prompts (learned policies override this with one forward)."""
        return [self.select(o) for o in observations]

    def predict(self, observation: np.ndarray, state: object = None, episode_start: np.ndarray | None = None,
                deterministic: bool = False) -> tuple[np.ndarray, object]:
        """stable-baselines3-style: observations [n, V] (or [V]) of raw logits -> candidate indices [n]."""
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs[None] if single else obs
        chosen = self.select_batch([PromptObservation(row, 0) for row in batch])
        outside = sorted(set(chosen) - set(self.candidates))
        if outside:
            raise ValueError(f"{self.name} chose block size {outside[0]}, which is not among its candidates "
                             f"{list(self.candidates)} (the actions); build it with {outside[0]} among them")
        actions = np.array([self.candidates.index(b) for b in chosen], dtype=np.int64)
        return (actions[0] if single else actions), state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, candidates={list(self.candidates)})"


class LearnedPolicy(Policy):
    """A policy with parameters: :meth:`fit`, :meth:`save`/:meth:`load` (safetensors and JSON; no pickle)."""

    training_options: tuple[str, ...] = ()
    """the ``specpolicy train`` options this family reads (e.g. ``epochs``); any other one given is refused"""
    validated_with: CostTable | None = None
    """the table a portable policy's training validated its choices with (without observation costs)"""
    allowed: tuple[int, ...] | None = None  # the trained classes it may choose (:meth:`restrict`); None: all

    def restrict(self, offered: Sequence[int]) -> LearnedPolicy:
        """Choose only among the trained classes in ``offered`` (an engine that cannot run the others)."""
        kept = tuple(b for b in self.candidates if b in set(offered))
        if not kept:
            raise ValueError(f"{self.name} was trained on {list(self.candidates)}, none of which is offered "
                             f"({sorted(offered)})")
        self.allowed = kept if kept != self.candidates else None
        return self

    def choices(self) -> set[int]:
        return set(self.allowed or self.candidates)

    def with_validated(self, settings: dict) -> dict:
        """``settings`` plus :attr:`validated_with` as JSON (read back by :meth:`validated_from`)."""
        return settings | {"validated_with": self.validated_with.to_json() if self.validated_with is not None
                           else None}

    @staticmethod
    def validated_from(settings: Mapping) -> CostTable | None:
        """The table :meth:`with_validated` saved in ``settings`` (``None``: validated with none)."""
        table = settings.get("validated_with")
        return CostTable.from_json(table) if table else None

    def fastest_choices(self, cycles_per_token: np.ndarray, tables: Sequence[CostTable | None]) -> list[int]:
        """Block sizes from predicted cycles per token [n, C]: per prompt (per cycle if :attr:`per_step`) the
        fewest expected seconds under its table (or :attr:`validated_with`; with none: every cycle alike)."""
        offered = self.allowed or self.candidates
        rows = np.atleast_2d(cycles_per_token)[:, [self.candidates.index(b) for b in offered]]
        return [offered[int((table or self.validated_with or uniform_costs(self.candidates)).fastest(
            row, offered, self.per_step)[0])] for row, table in zip(rows, tables, strict=True)]

    def fit(self, dataset: TrainingSet, validation: TrainingSet | None = None, seed: int = 0,
            **options: object) -> dict:
        """Train on ``dataset`` (early stopping on ``validation``); ``options``: those of
        :attr:`training_options` that fit reads. Returns a summary (accuracies, epochs, ...)."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        raise NotImplementedError

    @classmethod
    def load(cls, path: str | Path, candidates: Sequence[int] | None = None) -> LearnedPolicy:
        raise NotImplementedError


@dataclass
class TrainingSet:
    """Per-prompt features and labels for learned policies: ``logits`` [n, V] ([n, 0] for traces),
    ``prompt_lengths``, ``labels``, ``prompt_ids`` [n]; ``taus``, ``values``, ``cycles_per_token`` [n, C];
    ``episodes`` (replay tables) and ``costs``."""

    logits: np.ndarray
    prompt_lengths: np.ndarray
    labels: np.ndarray
    taus: np.ndarray
    candidates: tuple[int, ...]
    prompt_ids: list[str]
    values: np.ndarray | None = None
    episodes: list | None = field(default=None, repr=False)
    costs: CostTable | None = field(default=None, repr=False)
    cycles_per_token: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.values is None:
            self.values = self.taus
        if self.cycles_per_token is None:
            self.cycles_per_token = 1.0 / np.maximum(np.asarray(self.taus, dtype=np.float64), 1.0)

    def __len__(self) -> int:
        return len(self.labels)

    def prefill_features(self) -> np.ndarray:
        """``logits``, for policies that learn from the prefill; a ValueError for a store with none."""
        if self.logits.shape[1] == 0:
            raise ValueError("this policy learns from the prefill logits, which the sweep does not record "
                             "(imported traces); train a per-cycle policy such as `cycle` on it, or sweep "
                             "with specpolicy")
        return self.logits

    def subset(self, index: np.ndarray) -> TrainingSet:
        return TrainingSet(self.logits[index], self.prompt_lengths[index], self.labels[index],
                           self.taus[index], self.candidates, [self.prompt_ids[i] for i in index],
                           self.values[index],
                           [self.episodes[i] for i in index] if self.episodes is not None else None,
                           self.costs, self.cycles_per_token[index])

    def observations(self) -> list[PromptObservation]:
        return [PromptObservation(self.logits[i], int(self.prompt_lengths[i]), self.prompt_ids[i])
                for i in range(len(self))]


def oracle_label(taus: Sequence[float], candidates: Sequence[int],
                 training_block_size: int = TRAINING_BLOCK_SIZE) -> int:
    """Index of the best candidate (highest tau; ties: nearest ``training_block_size``, then smaller)."""
    distance = [abs(b - training_block_size) for b in candidates]
    return min(range(len(candidates)), key=lambda j: (-round(float(taus[j]), 9), distance[j], candidates[j]))
