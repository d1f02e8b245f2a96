"""Policy evaluation from a sweep store by exact replay (modelled time) or a live sweep's measured runs. Numpy
only; figures in :mod:`specpolicy.evaluation.metrics`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from specpolicy.arguments import check_candidate_set
from specpolicy.checks import check_vocabulary
from specpolicy.costs import CostTable, nearest_context
from specpolicy.cycles import CycleRecord
from specpolicy.evaluation.metrics import PolicyResults, PromptResult
from specpolicy.policy import Answers, Policy, PromptObservation
from specpolicy.replay.lockstep import Lanes, lockstep
from specpolicy.replay.table import ReplayTable
from specpolicy.state import mean_acceptance
from specpolicy.sweep.records import SweepRecord
from specpolicy.sweep.store import SweepStore


def check_candidates(policy: Policy, available: Sequence[int], confidences: Sequence[int] | None = None,
                     given: bool = False, imported: bool = False, stored: Sequence[int] = (),
                     recorded: int = 0) -> None:
    """Fail, naming both sides and a fix that works, when ``policy`` can choose a block size the sweep (or
    ``--candidates``, ``given``; ``stored``: the sweep's own sizes; ``recorded``: the largest an imported file
    replays) lacks, or reads drafter confidences it did not record (``confidences``; ``None``: unchecked)."""
    wanted = policy.choices()
    missing = sorted(wanted - set(available))
    if missing and (given or set(missing) <= set(stored)):
        held = " (the sweep holds them)" if set(missing) <= set(stored) else ""
        raise ValueError(f"policy {policy.name!r} chooses among {sorted(wanted)} but --candidates gives "
                         f"{sorted(available)} (missing {missing}); add them to --candidates{held}")
    fix = f"the file records more: import it again with --candidates 1-{recorded}" if \
        imported and max(missing, default=0) <= recorded else \
        "the imported recording covers no others: compare policies over its block sizes (fixedN, adaptive, " \
        "oracle-step)" if imported else \
        f"sweep them too (specpolicy sweep --candidates {','.join(map(str, sorted({*available, *missing})))})"
    if missing:
        raise ValueError(f"policy {policy.name!r} chooses among {sorted(wanted)} but the sweep recorded "
                         f"{sorted(available)} (missing {missing}); {fix}")
    unread = sorted(policy.confidence_sizes() - set(confidences or [])) if confidences is not None else []
    if unread:
        fix = ("an imported recording holds no drafter confidences: compare policies that read none (fixedN, "
               "adaptive, oracle-step)") if imported else \
            f"sweep with --verify-lengths --confidences {','.join(map(str, unread))}"
        raise ValueError(f"policy {policy.name!r} reads the drafter's confidences at B = {unread}, which "
                         f"the sweep did not record; {fix}")


def check_policies(policies: Sequence[Policy], store: SweepStore,
                   candidates: Sequence[int] | None = None) -> None:
    """``policies`` as Policy objects, and everything a stored sweep must hold for them (prefill logits, block
    sizes, confidences, vocabulary), checked once before any work."""
    if isinstance(policies, str) or not all(isinstance(p, Policy) for p in policies):
        raise ValueError("policies must be a list of Policy objects (create_policy(name, candidates)), got "
                         f"{policies!r}")
    width = store.feature_width()
    unfed = [p.name for p in policies if width is None and p.vocabulary() is not None]
    if unfed:
        raise ValueError(f"{', '.join(unfed)} read{'s' if len(unfed) == 1 else ''} the prefill logits, "
                         f"which the sweep {store.path} does not record (an engine records none: import "
                         "again with `specpolicy import-traces --prompts FILE --target MODEL`, the prompts "
                         "it ran by request id); or compare policies that read the cycles, such as adaptive "
                         "(the default's per-cycle guard), oracle-step or fixedN")
    if any(p.per_step for p in policies) and store.meta.get("runs"):
        raise ValueError(f"each run of {store.path} recorded one block ({store.meta['runs']}): a per-cycle "
                         "policy visits anchors none saw; compare per-prompt ones (fixedN, oracle, choices)")
    for policy in policies:
        check_candidates(policy, store.candidates if candidates is None else candidates,
                         store.meta.get("confidence_sizes", []),
                         imported=store.meta.get("mode") == "imported",
                         stored=store.candidates, recorded=store.meta.get("recorded", 0))
    check_vocabulary(policies, width, f"the sweep {store.path}")


def prompt_observation(store: SweepStore, record: SweepRecord,
                       costs: CostTable | None = None) -> PromptObservation:
    """What a policy reads for a stored prompt: its prefill logits (as the sweep kept them), and ``costs``."""
    logits = store.features(record) if record.features else np.zeros(0, dtype=np.float32)
    return PromptObservation(logits, record.prompt_length, record.prompt_id, costs)


def evaluate_replay(
    store: SweepStore,
    policies: Sequence[Policy],
    on_progress: Callable[[int, int], None] | None = None,
    *,
    costs: CostTable | Sequence[CostTable] | None = None,
    candidates: Sequence[int] | None = None,
) -> list[PolicyResults]:
    """Evaluate policies on every valid record of ``store`` by exact replay (or stored taus); ``costs``: the
    table(s) pricing time (default: the store's; several by context: each cycle at its starting context, the
    policies deciding with the prompt's); ``candidates``: the oracle's range."""
    check_policies(policies, store)
    candidates = _check_arguments(costs, candidates) or store.candidates
    costs = costs if costs is not None else store.latency()
    tables = [costs] if costs is None or isinstance(costs, CostTable) else list(costs)
    _check_priced(tables, candidates, policies)
    live = store.meta.get("mode") == "live"  # a live sweep measured every fixed size: its own times
    results = [PolicyResults(p.name, "measured" if live else "modelled" if costs else "none")
               for p in policies]
    records = list(store.records())
    if not records:
        raise ValueError(f"sweep store {store.path} has no valid records; run or resume the sweep first")
    answered = [Answers(record.taus, record.table() if record.replay is not None else None,
                        record.training_block_size, {b: r.decode_seconds / max(1, r.tokens)
                                                     for b, r in record.live.items()} if live else None)
                for record in records]
    one = None if live or len(tables) > 1 else tables[0]  # lockstep prices with one table
    stepping = one is not None and all(a.table is not None and not a.table.rounds for a in answered)
    rules = {(j, p): rule for j, policy in enumerate(policies) if stepping and policy.needs_sweep  # oracles'
             for p, rule in enumerate(policy.lockstep_rules(answered, one)) if rule is not None}
    oracles = []
    for p, (record, answers) in enumerate(zip(records, answered)):
        costs = nearest_context(tables, record.prompt_length) if len(tables) > 1 else tables[0]
        observation = prompt_observation(store, record, costs)
        # the per-prompt time oracle's rule (plugins/oracle.py too)
        oracles.append(oracle := answers.fastest(candidates, costs))
        for j, (policy, result) in enumerate(zip(policies, results)):
            if stepping and not policy.needs_sweep and (rule := policy.lockstep_rule(observation)):
                rules[j, p] = rule  # its result comes from lockstep, below
            result.prompts.append(_measured(policy, observation, answers, record, oracle) if live else None
                                  if (j, p) in rules else
                                  _replayed(policy, observation, answers, record.prompt_id, tables, oracle))
        if on_progress:
            on_progress(p + 1, len(records))
    for (j, p), (lanes, lane) in _stepped([a.table for a in answered], rules, one).items():
        results[j].prompts[p] = _lane_result(lanes, lane, records[p].prompt_id, one, oracles[p],
                                             getattr(rules[j, p], "plain", False))
    return results


def _check_priced(tables: Sequence[CostTable | None], candidates: Sequence[int],
                  policies: Sequence[Policy]) -> None:
    """Before any work: every table prices every block size replay will (the oracle's ``candidates``, every
    policy's choices), or a ValueError naming the missing sizes and the ``--candidates`` it can price."""
    wanted = set(candidates).union(*(p.choices() for p in policies))
    for table in (t for t in tables if t is not None):
        missing = sorted(wanted - set(table.block_sizes))
        if missing:
            priced = ",".join(str(b) for b in sorted(set(candidates) & set(table.block_sizes)))
            raise ValueError(f"the cost table ({table.machine}) prices no B = {missing}, which this "
                             "comparison prices (the sweep's block sizes and the policies' choices); "
                             f"compare over the sizes it prices (--candidates {priced}), or measure a table "
                             "with them (`specpolicy bench latency --candidates ...`)")


def _check_arguments(costs: object, candidates: object) -> tuple[int, ...] | None:
    """evaluate_replay's arguments as the command checks its options; the candidates, checked."""
    tables = costs if isinstance(costs, list | tuple) else [costs]
    if not all(t is None or isinstance(t, CostTable) for t in tables):
        raise ValueError(f"costs must be a CostTable or a list of them (CostTable.load(path)), got {costs!r}")
    return None if candidates is None else check_candidate_set(candidates, "candidates")


def _replayed(policy: Policy, observation: PromptObservation, answers: Answers, prompt_id: str,
              tables: Sequence[CostTable | None], oracle: int) -> PromptResult:
    """One policy on one stored prompt: replayed cycles, each priced by the table nearest its context."""
    plan = policy.checked_plan(observation, answers)
    table = answers.table
    if table is not None:
        cycles = table.simulate(plan, observation.logits if observation.logits.size else None)
        sizes, tau = [c.block_size for c in cycles], mean_acceptance(cycles)
        tokens = sum(c.committed for c in cycles)
    elif plan.block_size is not None and plan.length is None:
        sizes, tau, tokens = [plan.block_size], float(answers.taus[plan.block_size]), 0
    else:
        raise ValueError(f"per-cycle policy {policy.name!r} needs a replay sweep; the store has only taus")
    timed = tables[0] is not None and table is not None and bool(sizes)
    plain = plan.block_size == 1 and plan.length is None  # plain decoding (CostTable.fixed_cycle_seconds)
    seconds, ar_seconds = _priced(cycles, tables, observation.prompt_length, plain) if timed else (0.0, None)
    return PromptResult(prompt_id, sizes, tau, tokens, seconds, ar_seconds, oracle,
                        len(cycles) if table else 0)


def _stepped(replays: Sequence[ReplayTable], rules: dict[tuple[int, int], Any], costs: CostTable
             ) -> dict[tuple[int, int], tuple[Lanes, int]]:
    """(policy index, prompt index) -> (the lockstep replay that ran its array rule, in ``rules``, on the
    prompt, its lane): every prompt's rule stepped with all others of its class, verify block and model."""
    key = {id(r): (type(r), getattr(r, "verify_block", 0), *(id(getattr(r, f.name)) for f in fields(r)
                                                               if f.metadata.get("shared")))
           for r in {id(r): r for r in rules.values()}.values()}
    groups: dict[tuple, list[tuple[tuple[int, int], Any]]] = {}
    for member in rules.items():
        groups.setdefault(key[id(member[1])], []).append(member)
    stepped = {}
    for members in groups.values():
        settings = list({id(rule): rule for _, rule in members}.values())
        index = {id(rule): i for i, rule in enumerate(settings)}
        lanes = lockstep(replays, settings, (np.array([p for (_, p), _ in members]),
                                             np.array([index[id(r)] for _, r in members])), costs)
        stepped.update({member: (lanes, lane) for lane, (member, _) in enumerate(members)})
    return stepped


def _lane_result(lanes: Lanes, lane: int, prompt_id: str, costs: CostTable, oracle: int, plain: bool
                 ) -> PromptResult:
    """What a lockstep replay's ``lane`` ran, as the prompt's result (as :func:`_replayed` reports it;
    ``plain``: plain decoding, its tokens at :attr:`~CostTable.ar_seconds`)."""
    tokens, cycles = lanes.totals[1:, lane].astype(int).tolist()
    seconds = tokens * costs.ar_seconds if plain else float(lanes.totals[0, lane])
    return PromptResult(prompt_id, lanes.block_sizes[lane].tolist(), tokens / cycles if cycles else 0.0,
                        tokens, seconds, tokens * costs.ar_seconds if cycles else None, oracle, cycles)


def _priced(cycles: Sequence[CycleRecord], tables: Sequence[CostTable], prompt_length: int, plain: bool
            ) -> tuple[float, float]:
    """(modelled seconds of ``cycles``, of plain AR for their tokens); ``plain``: cycles are plain steps."""
    if len(tables) == 1:
        ar_seconds = sum(c.committed for c in cycles) * tables[0].ar_seconds
        return ar_seconds if plain else tables[0].cycles_seconds(cycles), ar_seconds
    seconds = ar_seconds = 0.0
    position = prompt_length
    for cycle in cycles:
        costs = nearest_context(tables, position)
        ar_seconds += cycle.committed * costs.ar_seconds
        seconds += costs.ar_seconds if plain else costs.split_cycle_seconds(cycle.block_size,
                                                                             cycle.verify_length)
        position += cycle.committed
    return seconds, ar_seconds


def _measured(policy: Policy, observation: PromptObservation, answers: Answers, record: SweepRecord,
              oracle: int) -> PromptResult:
    """One per-prompt policy on a live sweep's prompt: the decode measured at its block size; plain AR's time
    is the B = 1 decode's (through the speculative loop), scaled to the same tokens."""
    plan = policy.plan(observation, answers)
    if plan.block_size is None or plan.length is not None:
        raise ValueError(f"policy {policy.name!r} decides per cycle or sets verify lengths; a live sweep "
                         "measured fixed block sizes only: sweep with --mode replay for it")
    run, ar = record.live[plan.block_size], record.live[1]
    ar_seconds = ar.decode_seconds * run.tokens / max(1, ar.tokens)
    return PromptResult(record.prompt_id, [plan.block_size], run.tau, run.tokens, run.decode_seconds,
                        ar_seconds, oracle, len(run.cycles))
