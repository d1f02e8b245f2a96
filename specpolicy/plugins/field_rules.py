"""The field's block-size controllers as plan values (docs/field.md): a controller, a frozen dataclass of its
engine's parameters (``name=value`` overrides), folds a request's finished cycles into its state and picks the
next B; state is per request, except where ``resume`` carries it across requests as its engine does."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol

import numpy as np

from specpolicy.arguments import check_candidate_set, check_count, check_real
from specpolicy.costs import CostTable
from specpolicy.cycles import Plan
from specpolicy.plugins.cycle_rules import required_costs
from specpolicy.plugins.engine_rules import engine_args, engine_terms
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.lanes import State, lane_block
from specpolicy.state import DecodeState


class Controller(Protocol):
    """An engine's controller: ``start`` a request's state, ``update`` it after every cycle (its verified
    length L, accepted drafts and modelled seconds), pick the next ``block`` at a batch size; with ``LANES``,
    over arrays [lanes] of requests and settings."""

    reads_time: bool
    TERMS: dict[str, str]
    """each field's name in the engine where it differs: ``--flag``, ``$ENV``, ``json:key.path`` of the
    engine's config file, or a constant of its source (``# ...``: a literal in its code)"""

    def start(self, prompt_length: int) -> State: ...

    def update(self, s: State, length: int, accepted: int, seconds: float, block: int) -> None: ...

    def block(self, s: State, batch: int) -> int: ...

    def choices(self) -> set[int]: ...


def push(window: np.ndarray, count: np.ndarray, value: object, where: np.ndarray, cap: object
          ) -> tuple[np.ndarray, np.ndarray]:
    """``value`` [lanes] appended at lanes ``where`` to windows [lanes, W] holding ``count`` (<= ``cap``)."""
    shifted = np.concatenate([window[:, 1:], np.broadcast_to(value, count.shape)[:, None]], axis=1)
    return np.where(where[:, None], shifted, window), np.where(where, np.minimum(count + 1, cap), count)


def window_sum(window: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Each lane's last ``count`` entries summed oldest first, as a list's ``sum`` adds them."""
    inside = np.arange(window.shape[1]) >= window.shape[1] - count[:, None]
    if window.dtype.kind != "f":
        return (window * inside).sum(axis=1)
    total = np.zeros(len(count))
    for column in range(window.shape[1]):
        total = total + np.where(inside[:, column], window[:, column], 0.0)
    return total


@dataclass(frozen=True)
class FieldRule:
    """A field controller as a plan's block rule: its state folded over the request's finished cycles (each
    seen at its verified length L, the tokens an engine counts, priced by ``costs`` where it reads time);
    ``shared`` holds the latest state of a controller an engine keeps across requests (it seeds the next)."""

    controller: Controller
    costs: CostTable | None = field(default=None, compare=False, repr=False)
    shared: list = field(default=None, compare=False, repr=False)

    def __call__(self, state: DecodeState) -> int:
        folded, block = lane_block(self.controller, state, lambda b, n: self.costs.split_cycle_seconds(b, n)
                                   if self.costs else 0.0, lambda: self._start(state.prompt_length))
        if self.shared:
            self.shared[0] = folded
        return block

    def _start(self, prompt_length: int) -> State:
        carried, arrays = self.shared[0] if self.shared else None, getattr(self.controller, "LANES", False)
        if carried:
            return self.controller.resume(copy.deepcopy(carried))
        return self.controller.start(np.array([prompt_length]) if arrays else prompt_length)


class FieldPolicy(Policy):
    """A field controller run per request (one with ``resume`` carries its state to the next request)."""

    per_step = True

    def __init__(self, candidates: Sequence[int], controller: Controller) -> None:
        super().__init__(candidates)
        self.controller = controller
        self.shared = [None] if hasattr(controller, "resume") else None  # one state across its requests

    def choices(self) -> set[int]:
        return self.controller.choices()

    def engine_terms(self) -> str:
        return engine_terms(self.controller)

    def select(self, observation: PromptObservation) -> int:
        """The first cycle's block, read from a fresh state (no cost table needed)."""
        first = DecodeState.after_prefill(observation.logits, observation.prompt_length)
        first.batch = observation.concurrency
        return FieldRule(self.controller)(first)

    def lockstep_rule(self, observation: PromptObservation | None = None) -> Controller | None:
        """Its controller where it runs in lockstep (``LANES``, a state per request), on every prompt."""
        return self.controller if getattr(self.controller, "LANES", False) and not self.shared else None

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        costs = required_costs(self, observation) if self.controller.reads_time else None
        rule = FieldRule(self.controller, costs, self.shared)
        verifying = getattr(self.controller, "verify_block", 0)  # a block drafted whole, its L the rule's
        return Plan.fixed(verifying).with_length(lambda s, _: rule(s), False) if verifying else Plan(rule)


def _checked(family: str, controller: Controller) -> Controller:
    """``controller`` whose counts are >= 0 (sizes >= 1) and rates finite, else a ValueError naming them."""
    for f in fields(controller):
        value, name = getattr(controller, f.name), f"{family}: {f.name}"
        if isinstance(value, tuple):
            for step in value or [None]:
                check_count(step, f"{name} (steps, joined by '/')", least=0)
        elif isinstance(value, float):
            check_real(value, name, -1.0, 1e6)
        else:
            check_count(value, name, least=1 if f.name.endswith(("tokens", "drafts", "size", "interval",
                                                                  "window")) else 0)
    check_candidate_set(controller.choices(), f"{family}: the blocks its settings choose")
    return controller


def field_policy(family: str, settings: type) -> object:
    def factory(arg: str | None, candidates: Sequence[int]) -> FieldPolicy:
        return FieldPolicy(candidates, _checked(family, engine_args(family, arg, settings)))
    return factory
