"""Policies deployed into llama.cpp's server and measured there (no torch): a per-prompt B routes each request
to its setting; a per-cycle rule that is a value runs inside a patched server, other per-cycle policies are
refused. The engine's costs and the comparison with replay: :mod:`specpolicy.evaluation.engine_compare`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.cycles import ConfidentPrefix, CostAwareLength, Plan
from specpolicy.defaults import DEFAULT_MODEL, TRAINING_BLOCK_SIZE
from specpolicy.engines.llamacpp import Reply, ServerPool, Setting
from specpolicy.evaluation.metrics import PolicyResults, PromptResult
from specpolicy.evaluation.replay import prompt_observation
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.lanes import CostAwareBlocks
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore

PLAIN = Setting(1)
FED = Setting(1, feeds_drafter=True)


def engine_sizes(candidates: Sequence[int], largest: int = TRAINING_BLOCK_SIZE) -> list[int]:
    """The block sizes among ``candidates`` llama.cpp runs with a drafter trained at ``largest`` (clamped)."""
    return sorted(b for b in candidates if b <= largest)


def trained_block(store: SweepStore) -> int:
    """The drafter's trained block size of a store's pair."""
    return int(store.meta.get("training_block_size") or TRAINING_BLOCK_SIZE)


@dataclass
class EngineRun:
    """What the engine did: each policy's measured results, and per prompt how its outputs compare."""

    results: list[PolicyResults]
    replies: dict[tuple[str, Setting], Reply] = field(default_factory=dict)
    """(prompt id, setting) -> the engine's reply"""
    recorded: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """prompt id -> specpolicy's recorded greedy output (the sweep's)"""
    chosen: dict[str, list[Setting]] = field(default_factory=dict)
    """prompt id -> the setting each policy ran it with"""

    def save_steps(self, folder: str | Path) -> list[Path]:
        """Each policy's replies as llama.cpp responses (JSONL, one ``/completion`` answer a prompt with its
        ``id``: ``import-traces`` reads a fixed setting's), ``folder/<policy>.jsonl``; the files written."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        files = []
        for k, result in enumerate(self.results):
            lines = [json.dumps(self.replies[pid, settings[k]].response(pid))
                     for pid, settings in self.chosen.items()]
            files.append(folder / f"{result.policy.replace('/', '_')}.jsonl")
            files[-1].write_text("\n".join(lines) + "\n", encoding="utf-8")
        return files

    def lossless_failures(self) -> list[tuple[str, Setting]]:
        """(prompt, setting) whose greedy output differs from the same server's plain decoding."""
        return [(pid, s) for (pid, s), reply in self.replies.items()
                if reply.tokens != self.replies[pid, PLAIN].tokens]

    def first_difference(self, prompt_id: str) -> int | None:
        """Where the engine's plain output first differs from specpolicy's recorded one (``None``: equal)."""
        ours, theirs = self.recorded[prompt_id], self.replies[prompt_id, PLAIN].tokens
        diverged = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        return diverged[0] if diverged else None if len(ours) == len(theirs) else min(len(ours), len(theirs))


def engine_setting(policy: Policy, plan: Plan | None, largest: int, per_request: bool = False) -> Setting:
    """The setting ``plan`` (a prompt's; ``None``: none fixed) runs as in llama.cpp, matched on its values: a
    fixed block (B <= ``largest``, the drafter's trained block), verified whole or up to the first draft below
    p (p_min); on a patched server (``per_request``) also the cost-aware block rule and verify length."""
    rule = plan.block if plan is not None else None
    verify = plan.length if plan is not None else None
    lengths = verify if isinstance(verify, CostAwareLength) else None  # the cost-aware verify length
    blocks = rule.blocks if isinstance(rule, CostAwareBlocks) else (plan.block_size,) if lengths else None
    if per_request and blocks and blocks[0] and (verify is None or lengths):
        if max(blocks) > largest:
            raise ValueError(f"{policy.name} chooses blocks up to {max(blocks)}, past the drafter's "
                             f"trained block {largest}; pass --candidates up to {largest}")
        request = rule.request() if isinstance(rule, CostAwareBlocks) else _fixed_rule(plan.block_size)
        return Setting(largest, plan=json.dumps(request | (lengths.request() if lengths else {}),
                                                sort_keys=True))
    p_min = verify.threshold if isinstance(verify, ConfidentPrefix) and not verify.running else None
    if plan is None or plan.block_size is None or (verify is not None and p_min is None):
        raise ValueError(f"{policy.name} decides per cycle or sets verify lengths with a rule llama.cpp "
                         "cannot run: a server built by `specpolicy engine build` (patched) runs the "
                         "cost-aware block rule (adaptive, blockpilot-guard) and verify length (marginal, "
                         "adaptive-verify) per step, a stock one takes its settings per server; compare it "
                         "in replay, or run llama.cpp's own rule llamacpp-pmin:n_max=N,p_min=P")
    if plan.block_size > largest:
        raise ValueError(f"{policy.name} chose block size {plan.block_size}, past the drafter's trained "
                         f"block {largest}, which llama.cpp clamps to {largest}; pass --candidates up to "
                         f"{largest}")
    return Setting(plan.block_size, p_min or 0.0)


def _fixed_rule(block_size: int) -> dict:
    """A fixed B as the patched server's block rule (never a plain step), for a verify rule beside it."""
    return {"blocks": [block_size], "priced": [block_size], "seconds": [1.0], "ar_seconds": 1.0,
            "ar_allowed": False, "start": block_size}


def for_engine(policy: Policy, sizes: Sequence[int]) -> Policy:
    """``policy`` choosing among the block sizes the engine runs (a learned one, or one with a learned start,
    over its trained classes in ``sizes``: ``restrict``)."""
    return policy.restrict(sizes)


def deployable_settings(policy: Policy, largest: int) -> list[Setting]:
    """Every server setting ``policy`` can route a request to (what ``export --engine llamacpp`` starts); a
    policy the engine cannot run is refused as :func:`engine_setting` refuses it."""
    if policy.needs_sweep:
        raise ValueError(f"{policy.name} plans from a sweep's measurements (an upper bound): nothing to "
                         "deploy")
    if not (policy.per_step or type(policy).plan is not Policy.plan):  # per prompt: any of its choices
        return sorted({engine_setting(policy, Plan.fixed(b), largest) for b in policy.choices()})
    plan = None
    # a plan no prompt changes (llamacpp-pmin's), if any
    if policy.vocabulary() is None and not policy.per_step:
        with contextlib.suppress(ValueError):  # one that reads the machine's cost table has none without it
            plan = policy.plan(PromptObservation(np.zeros(0, np.float32), 0))
    if plan is None:
        raise ValueError(f"{policy.name} plans each prompt or step from what it reads at run time (the "
                         "prompt, the engine's cost table): there is no fixed setting to export; run it in "
                         "the engine with `specpolicy compare --engine llamacpp` (a patched server runs "
                         "the cost-aware rule per step), or export a per-prompt policy")
    return [engine_setting(policy, plan, largest)]


def plan_settings(store: SweepStore, records: Sequence[SweepRecord], policies: Sequence[Policy],
                  costs: CostTable | None, per_request: bool = False) -> list[list[Setting]]:
    """The settings per prompt, per policy, every plan made and checked before any server starts
    (``per_request``: a patched server runs per-step plans whose rule is a value); a prompt decoded plainly
    goes to plain decoding's server (no drafter runs, as replay prices it)."""
    largest = trained_block(store)
    settings = []
    for record in records:
        observation = prompt_observation(store, record, costs)
        answers = Answers(record.taus, record.table() if record.replay is not None else None,
                          record.training_block_size)
        plans = [policy.checked_plan(observation, answers) for policy in policies]
        settings.append([engine_setting(policy, plan, largest, per_request)
                         for policy, plan in zip(policies, plans)])
    return settings


def evaluate_engine(pool: ServerPool, store: SweepStore, policies: Sequence[Policy], *,
                    costs: CostTable | None = None, records: Sequence[SweepRecord] | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> EngineRun:
    """Decode every stored prompt in the engine plainly and with each policy's setting (order rotating)."""
    records = list(records if records is not None else store.records())
    if not records or any(r.replay is None for r in records):
        raise ValueError(f"{store.path} holds no replay records (prompt tokens); pass a replay sweep")
    settings = plan_settings(store, records, policies, costs, pool.per_request)
    run = EngineRun([PolicyResults(p.name, "measured") for p in policies])
    for n, (record, chosen) in enumerate(zip(records, settings)):
        prompt = list(record.replay.sequence[:record.prompt_length])
        budget = record.replay.budget or record.output_length
        output = record.replay.sequence[record.prompt_length:][:record.output_length]
        run.recorded[record.prompt_id] = tuple(output)
        order = sorted({PLAIN, *chosen})
        shift = n % len(order)
        for setting in order[shift:] + order[:shift]:
            run.replies[record.prompt_id, setting] = pool[setting].complete(prompt, budget)
        plain = run.replies[record.prompt_id, PLAIN]
        run.chosen[record.prompt_id] = chosen
        for result, setting in zip(run.results, chosen):
            reply = run.replies[record.prompt_id, setting]
            ar_seconds = plain.seconds * len(reply.tokens) / max(1, len(plain.tokens))
            sizes = [s.block for s in reply.steps] if setting.plan else [setting.block_size] * reply.cycles
            result.prompts.append(PromptResult(record.prompt_id, sizes, reply.tau, len(reply.tokens),
                                               reply.seconds, ar_seconds, cycles=reply.cycles))
        if on_progress:
            on_progress(n + 1, len(records))
    return run


def generate_engine(prompt_ids: Sequence[int], policy: Policy, observation: PromptObservation, budget: int, *,
                    largest: int = TRAINING_BLOCK_SIZE, threads: int = 1, server: str | Path | None = None,
                    target: str = DEFAULT_MODEL, drafter: str = DEFAULT_MODEL,
                    report: Callable[[str], None] = print) -> tuple[Reply, Setting]:
    """``specpolicy generate --engine llamacpp`` from Python: ``policy``'s plan for ``observation`` run in
    llama.cpp as :func:`engine_setting` maps it (refused before any server starts), ``budget`` tokens; the
    engine's reply and the setting it ran. ``largest``: the drafter's trained block."""
    from specpolicy.engines.build import find_server, gguf_pair, patched

    binary = find_server(server)
    setting = engine_setting(policy, policy.checked_plan(observation), largest, patched(binary))
    folder = gguf_pair(target, drafter, report=report)
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", threads) as pool:
        return pool[setting].complete(list(prompt_ids), budget), setting
