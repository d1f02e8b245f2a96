"""The serving engines' own draft/verify rules as policies, with the engines' parameter names and defaults
(``name=value``, as ``trtllm-schedule:draft_len_schedule=4:4/8:2/32:1``): ``vllm-dsd``, ``trtllm-schedule``,
``vllm-adaptive`` and ``llamacpp-pmin``; docs/engines.md has each rule and its source."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import ClassVar

from specpolicy.arguments import check_count, check_real
from specpolicy.cycles import Plan
from specpolicy.defaults import ENGINE_DRAFTS, LLAMACPP_N_MAX, LLAMACPP_P_MIN, MAX_BLOCK_SIZE
from specpolicy.plugins.verify_rules import MarginalPolicy, ThresholdPolicy
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.export import EngineConfigPolicy, VllmConfig, vllm_lookup
from specpolicy.state import DecodeState

MINIMUM = {"n_max": 1, "num_speculative_tokens": 1, "max_draft_len": 1, "acceptance_rate_window_size": 0,
           "acceptance_rate_threshold": 0.0}
"""the least value of each engine parameter the engines take (p_min: checked as a probability)"""
DRAFT_COUNTS = ("n_max", "num_speculative_tokens", "max_draft_len")


def _whole(text: str) -> int:
    """A whole number as written (``1_5``, which ``int`` reads as 15, is refused)."""
    if not re.fullmatch(r"-?\d+", text.strip()):
        raise ValueError(f"{text!r} is not a whole number")
    return int(text)


def _decimal(text: str) -> float:
    """A number as written (``float`` reads ``1_5`` as 15: refused)."""
    if "_" in text:
        raise ValueError(f"{text!r} is not a number")
    return float(text)


def _mapping(text: str) -> dict[int, int]:
    """``"4:4/8:2"`` -> ``{4: 4, 8: 2}`` (batch sizes >= 1, drafts >= 0)."""
    pairs = [item.split(":") for item in text.split("/") if item]
    if not pairs or any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"expected KEY:VALUE pairs joined by '/', such as 4:4/8:2/32:1; got {text!r}")
    mapping = {_whole(key): _whole(value) for key, value in pairs}
    if min(mapping) < 1 or min(mapping.values()) < 0:
        raise ValueError(f"batch sizes start at 1, got {min(mapping)}" if min(mapping) < 1 else
                         f"drafts are >= 0, got {min(mapping.values())}")
    return mapping


def _ranges(text: str) -> list[list[int]]:
    """``"1-4:7/5-64:3"`` -> ``[[1, 4, 7], [5, 64, 3]]`` (vLLM's inclusive ranges)."""
    ranges = []
    for item in filter(None, text.split("/")):
        span, _, k = item.partition(":")
        start, _, end = span.partition("-")
        ranges.append([int(start), int(end or start), int(k)])
    if not ranges:
        raise ValueError(f"expected START-END:K ranges joined by '/', such as 1-4:7/5-64:3; got {text!r}")
    return ranges


def engine_args(family: str, arg: str | None, settings: type) -> object:
    """``settings`` (the engine's parameters and defaults) from ``"name=value,..."``; unknown, repeated,
    unparsable or out-of-range values refused, naming the family's parameters."""
    known = {f.name: f for f in fields(settings)}
    given: dict[str, object] = {}
    for item in filter(None, (arg or "").split(",")):
        name, _, text = item.partition("=")
        if name not in known:
            raise ValueError(f"{family} has no parameter {name!r}; its parameters: {', '.join(known)} "
                             f"(as {family}:{next(iter(known))}=VALUE,...)")
        if name in given:
            raise ValueError(f"{family}: {name} is given twice; give it once")
        kind = str(known[name].type)
        try:
            given[name] = (_mapping(text) if "dict" in kind else _ranges(text) if "list" in kind
                           else tuple(map(_whole, text.split("/"))) if "tuple" in kind
                           else _decimal(text) if "float" in kind else _whole(text))
        except ValueError as exc:
            if "dict" in kind:
                raise ValueError(f"{family}: {name}: {exc}") from None
            raise ValueError(f"{family}: {name}={text!r} does not parse ({exc})") from None
        least = MINIMUM.get(name)
        if least is not None:
            check = check_count if isinstance(least, int) else check_real
            check(given[name], f"{family}: {name} (at least the engine's least)", least)
        if name in DRAFT_COUNTS and given[name] >= MAX_BLOCK_SIZE:  # each drafts a block of this + 1
            raise ValueError(f"{family}: {name} drafts at most {MAX_BLOCK_SIZE - 1} tokens; got {text}")
    return settings(**given)


def engine_terms(controller: object) -> str:
    """A rule's settings (a dataclass with ``TERMS``) as its engine takes them: flags and environment on one
    line each, the config file's JSON, then the source's constants (``NAME = value``)."""
    flags, env, constants = [], [], []
    config = controller.config_base() if hasattr(controller, "config_base") else {}
    for f in fields(controller):
        value, term = getattr(controller, f.name), controller.TERMS.get(f.name, f.name)
        shown = ", ".join(map(str, value)) if isinstance(value, tuple) else value
        if term.startswith("--"):
            flags.append(f"{term} {shown}")
        elif term.startswith("$"):
            env.append(f"{term[1:]}={shown}")
        elif term.startswith("json:"):
            *parents, key = term[5:].split(".")
            node = config
            for parent in parents:
                node = node.setdefault(parent, {})
            node[key] = list(value) if isinstance(value, tuple) else value
        else:
            constants.append(f"{term.lstrip('# ')} = {shown}" + ("  # a literal in the source"
                                                                 if term.startswith("#") else ""))
    return "\n".join(filter(None, [" ".join(env), " ".join(flags), json.dumps(config) if config else "",
                                   *constants]))


@dataclass(frozen=True)
class VllmDsd:
    num_speculative_tokens: int = ENGINE_DRAFTS
    num_speculative_tokens_per_batch_size: list = field(default_factory=list)


def vllm_dsd_policy(arg: str | None, candidates: Sequence[int]) -> EngineConfigPolicy:
    args = engine_args("vllm-dsd", arg, VllmDsd)
    n = args.num_speculative_tokens
    return EngineConfigPolicy(VllmConfig(n, vllm_lookup(n, args.num_speculative_tokens_per_batch_size)),
                              candidates)


@dataclass(frozen=True)
class VllmAdaptive:
    num_speculative_tokens: int = ENGINE_DRAFTS


def vllm_adaptive_policy(arg: str | None, candidates: Sequence[int]) -> MarginalPolicy:
    return MarginalPolicy(candidates,
                          engine_args("vllm-adaptive", arg, VllmAdaptive).num_speculative_tokens + 1)


@dataclass(frozen=True)
class TrtllmSchedule:
    max_draft_len: int = ENGINE_DRAFTS
    draft_len_schedule: dict = field(default_factory=dict)
    acceptance_rate_window_size: int = 0
    acceptance_rate_threshold: float = 0.0

    def draft_len(self, batch_size: int) -> int:
        """Drafts at ``batch_size``: the first schedule key at or above it, 0 past the last one."""
        if not self.draft_len_schedule:
            return self.max_draft_len
        above = [key for key in sorted(self.draft_len_schedule) if key >= batch_size]
        return min(self.max_draft_len, self.draft_len_schedule[above[0]]) if above else 0


class TrtllmSchedulePolicy(Policy):
    """TensorRT-LLM's draft length by batch size, switched off for good by its acceptance gate."""

    def __init__(self, candidates: Sequence[int], settings: TrtllmSchedule) -> None:
        super().__init__(candidates)
        self.settings = settings
        self.served: list[DecodeState] = []  # each served request's state, read once it has completed
        self.window: list[float] = []  # mean accepted drafts per iteration of the last completed requests
        self.disabled = False

    def choices(self) -> set[int]:
        schedule, gate = self.settings.draft_len_schedule, self.settings.acceptance_rate_window_size > 0
        sizes = {*schedule.values(), 0} if schedule else {self.settings.max_draft_len, *({0} if gate else ())}
        return {min(size, self.settings.max_draft_len) + 1 for size in sizes}

    def select(self, observation: PromptObservation) -> int:
        self._record_completed()
        return 1 if self.disabled else self.settings.draft_len(observation.concurrency) + 1

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        size = self.select(observation)
        return Plan(lambda state: self._serve(state, size), block_size=size)

    def _serve(self, state: DecodeState, size: int) -> int:
        if state.cycle == 0 and size > 1:
            self.served.append(state)
        return size

    def _record_completed(self) -> None:
        """The gate's update per request served since the last (``SpeculationGate.record_avg_decoded``)."""
        window, threshold = self.settings.acceptance_rate_window_size, self.settings.acceptance_rate_threshold
        for state in self.served:
            if window > 0 and not self.disabled and state.accepted_history:
                self.window = [*self.window,
                               sum(state.accepted_history) / len(state.accepted_history)][-window:]
                self.disabled = len(self.window) == window and sum(self.window) / window < threshold
        self.served = []


def trtllm_schedule_policy(arg: str | None, candidates: Sequence[int]) -> TrtllmSchedulePolicy:
    return TrtllmSchedulePolicy(candidates, engine_args("trtllm-schedule", arg, TrtllmSchedule))


@dataclass(frozen=True)
class LlamacppPmin:
    n_max: int = LLAMACPP_N_MAX
    p_min: float = LLAMACPP_P_MIN
    TERMS: ClassVar[dict[str, str]] = {"p_min": "--spec-draft-p-min", "n_max": "--spec-draft-n-max"}


class LlamacppPminPolicy(ThresholdPolicy):
    """llama.cpp's stock flags: draft n_max + 1, verify up to the first draft below p_min."""

    def __init__(self, candidates: Sequence[int], settings: LlamacppPmin) -> None:
        super().__init__(candidates, settings.n_max + 1, settings.p_min, running=False)
        self.settings = settings

    def engine_terms(self) -> str:
        return engine_terms(self.settings)


def llamacpp_pmin_policy(arg: str | None, candidates: Sequence[int]) -> ThresholdPolicy:
    return LlamacppPminPolicy(candidates, engine_args("llamacpp-pmin", arg, LlamacppPmin))
