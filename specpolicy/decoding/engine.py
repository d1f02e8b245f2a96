"""Where a policy meets an engine: the observation it plans from after a live prefill, and its plan decoded
(replay, serving and transformers' ``generate`` run the same :class:`~specpolicy.cycles.Plan`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specpolicy.costs import CostTable
from specpolicy.cycles import run
from specpolicy.features import to_numpy
from specpolicy.policy import Policy, PromptObservation
from specpolicy.state import DecodeState

if TYPE_CHECKING:
    from specpolicy.decoding import DecodeTrace, SpeculativeDecoder


def observe(state: DecodeState, prompt_id: str = "", costs: CostTable | None = None) -> PromptObservation:
    """What a policy reads once prefill is done: the state's prefill logits [V] (as float32 numpy),
    the prompt length and id, and the cost table of the machine (``costs``)."""
    return PromptObservation(to_numpy(state.prefill_logits), state.prompt_length, prompt_id, costs)


def check_live(policies: Sequence[Policy], replay: str = "compare it on a sweep (compare_sweep)") -> None:
    """Refuse, naming them, policies that plan from a sweep's measurements (oracles), before any model loads:
    they cannot decode live. ``replay``: how the caller's user runs them on a sweep instead."""
    oracles = [policy.name for policy in policies if policy.needs_sweep]
    if oracles:
        raise ValueError(f"{', '.join(oracles)} reads a sweep store and cannot decode live; {replay}, or use "
                         "a deployable policy such as blockpilot-guard, adaptive or fixed16")


def decode(decoder: SpeculativeDecoder, prompt_ids: Sequence[int], policy: Policy, *, prompt_id: str = "",
           costs: CostTable | None = None, max_new_tokens: int | None = None, seed: int = 0) -> DecodeTrace:
    """Decode one prompt live with ``policy``: prefill, plan from the observation (timed), run."""
    session = decoder.start(prompt_ids, max_new_tokens=max_new_tokens, seed=seed)
    if not session.done:
        run(session, policy.checked_plan(observe(session.state, prompt_id, costs)))
    return session.trace()
