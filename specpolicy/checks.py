"""``check_policy``: verify that a policy honours the contract (as Gymnasium's ``check_env``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specpolicy.arguments import check_candidate_set, check_type
from specpolicy.costs import uniform_costs
from specpolicy.cycles import Plan
from specpolicy.defaults import CHECK_OBSERVATIONS, CHECK_VOCAB
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.state import DecodeState, DraftedBlock


class PolicyContractError(AssertionError):
    """A policy broke the contract; the message says which rule."""


def _fail(policy: Policy, rule: str) -> PolicyContractError:
    return PolicyContractError(f"policy {policy.name!r} ({type(policy).__name__}): {rule}")


def _observations(policy: Policy, vocab_size: int, n: int, seed: int
                  ) -> tuple[list[PromptObservation], list[Answers]]:
    rng = np.random.default_rng(seed)
    observations, answers = [], []
    costs = uniform_costs({*policy.candidates, *policy.choices()}, 0.005, per_token=0.1)  # every choice
    for i in range(n):
        taus = {b: float(rng.uniform(1, b)) for b in policy.candidates}
        logits = rng.normal(0, 3, vocab_size).astype(np.float32)
        observations.append(PromptObservation(logits, int(rng.integers(1, 300)), f"check:{i}", costs))
        answers.append(Answers(taus))
    return observations, answers


def _decide(policy: Policy, observation: PromptObservation, answers: Answers | None):
    """A per-prompt choice: ``select``, or an oracle's fixed plan from the answers."""
    if not policy.needs_sweep:
        return policy.select(observation)
    plan = policy.plan(observation, answers)
    return plan.block_size if plan.block_size is not None else plan


def check_policy(policy: Policy, vocab_size: int = CHECK_VOCAB, n: int = CHECK_OBSERVATIONS, seed: int = 0,
                 observations: list[PromptObservation] | None = None,
                 answers: list[Answers] | None = None) -> None:
    """Raise :class:`PolicyContractError` unless ``policy`` honours the contract: sorted distinct candidates;
    ``select`` deterministic, in ``choices()`` and equal to ``select_batch``; ``predict`` (SB3) gives
    candidate indices; per-cycle plans and verify rules return allowed sizes and lengths, deterministically.
    Oracles are checked through ``plan(observation, answers)`` (pass both, e.g. from a sweep store)."""
    check_type(policy, Policy, "policy", 'a Policy object; a name makes one: create_policy("fixed16", '
                                         "candidates)")
    candidates = policy.candidates
    try:
        if check_candidate_set(candidates) != tuple(candidates):
            raise ValueError(f"candidates must be sorted, got {list(candidates)}")
    except ValueError as exc:
        raise _fail(policy, str(exc)) from None
    choices = policy.choices()
    if not choices or any((not isinstance(b, (int, np.integer))) or b < 1 for b in choices):
        raise _fail(policy, f"choices() must be block sizes >= 1, got {choices}")
    if observations is None:
        observations, answers = _observations(policy, vocab_size, n, seed)
    answers = answers if answers is not None else [None] * len(observations)
    n = len(observations)
    if policy.per_step and policy.needs_sweep:
        return _check_oracle_plans(policy, observations, answers)
    picked = [_decide(policy, o, a) for o, a in zip(observations, answers)]
    for value in picked:
        if not isinstance(value, (int, np.integer)) or int(value) not in choices:
            raise _fail(policy, f"select returned {value!r}, not one of its choices {sorted(choices)}")
    if [_decide(policy, o, a) for o, a in zip(observations, answers)] != picked:
        raise _fail(policy, "select is not deterministic for the same observation")
    if not policy.needs_sweep and list(policy.select_batch(observations)) != picked:
        raise _fail(policy, "select_batch disagrees with select")
    if choices <= set(candidates) and not policy.needs_sweep:
        batch = np.stack([o.logits for o in observations])
        actions, _ = policy.predict(batch)
        if np.shape(actions) != (n,) or not np.all((actions >= 0) & (actions < len(candidates))):
            raise _fail(policy, f"predict must return {n} candidate indices, got {actions!r}")
        # predict sees only the observation array (no prompt length, no id): compare like with like
        expected = [policy.select(PromptObservation(o.logits, 0)) for o in observations]
        if [candidates[a] for a in actions] != expected:
            raise _fail(policy, "predict disagrees with select")
        single, _ = policy.predict(batch[0])
        if np.ndim(single) != 0 or candidates[int(single)] != expected[0]:
            raise _fail(policy, f"predict on one observation must return one index, got {single!r}")
    if not policy.needs_sweep:
        plan = policy.plan(observations[0])
        _check_plan(policy, plan, picked[0])
        _check_verify(policy, plan)


def _check_oracle_plans(policy: Policy, observations: list[PromptObservation], answers: list[Answers | None]
                        ) -> None:
    """A per-cycle oracle's plan, run on each prompt's own replay table, picks allowed (B, L) every cycle."""
    choices = policy.choices()
    for observation, answer in zip(observations, answers):
        if answer is None or answer.table is None:
            raise _fail(policy, "a per-cycle oracle plans on replay tables: pass observations and answers "
                                "(with tables) from a replay sweep store")
        cycles = answer.table.simulate(policy.plan(observation, answer))
        bad = [(c.block_size, c.verify_length) for c in cycles
               if c.block_size not in choices or not 1 <= c.verify_length <= c.block_size]
        if not cycles or bad:
            raise _fail(policy, f"its plan ran {len(cycles)} cycles with choices outside {sorted(choices)}: "
                                f"{bad[:3]}")


def _check_verify(policy: Policy, plan: Plan) -> None:
    """A plan's verify length lies in 1..B for every drafted B the policy may choose, deterministically."""
    if plan.length is None:
        return
    rng = np.random.default_rng(0)
    state = DecodeState.after_prefill(np.zeros(0, np.float32), 10)
    for size in sorted(b for b in policy.choices() if b > 1):
        confidences = tuple(round(float(c), 3) for c in rng.uniform(0, 1, size - 1))
        drafted = DraftedBlock(size, confidences, tuple(0.0 for _ in confidences))
        length = plan.length(state, drafted)
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or not 1 <= length <= size:
            raise _fail(policy, f"its plan's verify length is {length!r} for a block of {size}, not in "
                                f"1..{size}")
        if plan.length(state, drafted) != length:
            raise _fail(policy, "its plan's verify length is not deterministic for the same block")


def _check_plan(policy: Policy, plan: Plan, picked: int) -> None:
    """A per-step policy's plan picks allowed sizes every cycle; a per-prompt one's is its choice."""
    if not isinstance(plan, Plan):
        raise _fail(policy, f"plan() must return a Plan, got {type(plan).__name__}")
    choices = policy.choices()
    if not policy.per_step and plan.block_size is not None:
        if plan.block_size != picked:
            raise _fail(policy, f"a per-prompt policy's plan must be Plan.fixed(select()) = {picked}, got "
                                f"{plan.block_size}")
        return
    state = DecodeState.after_prefill(np.zeros(0, np.float32), 10)
    for cycle in range(4):
        value = plan.block(state)
        if int(value) not in choices:
            raise _fail(policy, f"per-cycle choice {value!r} at cycle {cycle} is not in {sorted(choices)}")
        state.record(int(value), int(value) - 1 if cycle % 2 == 0 else 0, int(value))
        state.cycle += 1


def check_vocabulary(policies: Sequence[Policy], vocab_size: int | None, source: str) -> None:
    """Fail, before any model work, when a policy reads logits of another vocabulary than ``source``'s."""
    if vocab_size is None:
        return
    for policy in policies:
        wanted = policy.vocabulary()
        if wanted is not None and wanted != vocab_size:
            raise ValueError(
                f"policy {policy.name!r} reads logits over a vocabulary of {wanted} but {source} has "
                f"{vocab_size}; train one for it (`specpolicy sweep --target ...` then `specpolicy train "
                "blockpilot --sweep DIR --out FOLDER`) or use a vocabulary-independent policy such as "
                "fixed16 or adaptive")
