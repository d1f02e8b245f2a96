"""Block-size sweeps into a sweep store: ``replay`` (default) decodes each prompt once and tabulates every
candidate exactly; ``live`` decodes at every candidate and B = 1 with measured timings."""

from __future__ import annotations

import platform
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from specpolicy.costs import CostTable
from specpolicy.data.prompts import Answer, Prompt, encode_prompt
from specpolicy.data.splits import text_key
from specpolicy.decoding import DecodeTrace, SpeculativeDecoder
from specpolicy.decoding.autoregressive import own_answer
from specpolicy.sweep.latency import measure_costs, pin_threads
from specpolicy.sweep.records import (
    RECORD_VERSION,
    LiveRun,
    ReferenceRun,
    ReplayEntry,
    SweepRecord,
    prompt_digest,
)
from specpolicy.sweep.replay import build_replay
from specpolicy.sweep.resume import StoreUnusableError, check_resumable
from specpolicy.sweep.settings import SweepSettings
from specpolicy.sweep.store import CorruptRecordWarning, SweepStore


def _cycles(trace: DecodeTrace) -> list[tuple]:
    return [(c.block_size, c.accepted, c.committed, round(c.draft_seconds, 6), round(c.verify_seconds, 6))
            for c in trace.cycles]


def prompt_fields(ids: Sequence[int], prompt: Prompt) -> dict:
    """A record's fields from its encoded prompt ``ids``: length, digest, and what the split groups it by."""
    return {"prompt_length": len(ids), "prompt_sha256": prompt_digest(ids),
            "conversation": prompt.conversation, "text_key": text_key(prompt.messages)}


def sweep_prompt(decoder: SpeculativeDecoder, prompt: Prompt, index: int, settings: SweepSettings,
                 tokenizer, answer: Answer | None = None) -> tuple[SweepRecord, object]:
    """One prompt's record (and its prefill logits [V]) under ``settings``; a multi-turn prompt's earlier
    turns are answered by the target first (:func:`~specpolicy.decoding.autoregressive.own_answer`)."""
    ids = encode_prompt(tokenizer, prompt, settings.prompt_tokens(decoder.max_positions),
                        answer or own_answer(decoder))
    candidates = sorted(settings.candidates)
    fields: dict = {"version": RECORD_VERSION, "prompt_id": prompt.id, "index": index,
                    **prompt_fields(ids, prompt), "training_block_size": decoder.drafter.block_size,
                    "category": prompt.category or None, "group": prompt.group or None}
    try:
        if settings.mode == "replay":
            table, trace = build_replay(decoder, ids, candidates, max_new_tokens=settings.max_new_tokens,
                                        seed=settings.seed,
                                        reference_block_size=settings.reference_block_size,
                                        verify_lengths=settings.verify_lengths,
                                        confidence_sizes=settings.confidence_sizes)
            fields["taus"] = table.taus()
            fields["replay"] = ReplayEntry.from_table(table)
            fields["reference"] = ReferenceRun(block_size=settings.reference_block_size,
                                               cycles=_cycles(trace), prefill_seconds=trace.prefill_seconds,
                                               decode_seconds=trace.decode_seconds)
        else:
            live, trace = {}, None
            for size in [1, *candidates]:
                trace_b = decoder.generate(ids, size, seed=settings.seed)
                live[size] = LiveRun(cycles=_cycles(trace_b), decode_seconds=trace_b.decode_seconds,
                                     tokens=trace_b.cycle_tokens, tau=trace_b.tau)
                trace = trace if trace is not None else trace_b
            fields["taus"] = {b: live[b].tau for b in candidates}
            fields["live"] = live
    except ValueError as error:
        raise ValueError(f"prompt {prompt.id!r} (line {index + 1} of the sample): {error}") from error
    record = SweepRecord(**fields, output_length=len(trace.output_ids), stop_reason=trace.stop_reason)
    return record, trace.prefill_logits


def _check_prompts(prompts: Sequence[Prompt]) -> None:
    """Fail before any model loads on prompts a store cannot key: duplicate or empty ids."""
    seen: set[str] = set()
    for prompt in prompts:
        if not prompt.id:
            raise ValueError("a prompt has an empty id; give every prompt an \"id\"")
        if prompt.id in seen:
            raise ValueError(f"prompt id {prompt.id!r} appears twice in the dataset; ids must be unique "
                             "(records are keyed by id)")
        seen.add(prompt.id)


def _check_unchanged(store: SweepStore, prompts: Sequence[Prompt], tokenizer, max_prompt_tokens: int,
                     answer: Answer | None = None) -> set[str]:
    """The ids already swept; a ValueError naming every prompt whose tokens no longer match its record."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptRecordWarning)
        recorded = {r.prompt_id: r.prompt_sha256 for r in store.records()}
    stale = [p.id for p in prompts if recorded.get(p.id)
             and recorded[p.id] != prompt_digest(encode_prompt(tokenizer, p, max_prompt_tokens, answer))]
    if stale:
        more = f" and {len(stale) - 5} more" if len(stale) > 5 else ""
        names = ", ".join(repr(s) for s in stale[:5]) + more
        raise StoreUnusableError(f"prompt {names} changed since it was swept into {store.path} (its tokens "
                                 "no longer match the stored record); sweep into a new --out folder, or "
                                 "restore the prompt text")
    return set(recorded)


def _damaged_or_missing_latency(store: SweepStore) -> bool:
    """True when the store needs its cost table (re)measured: none yet, or a damaged one (said on stderr)."""
    try:
        return store.latency() is None
    except ValueError as error:
        warnings.warn(f"{error}: measuring it again", stacklevel=3)
        return True


def _measured_table(decoder: SpeculativeDecoder, sizes: Sequence[int], where: Path) -> CostTable:
    """This machine's cost table, measured again once when flagged (a burst of load passes); a table still
    flagged is kept with its warnings and said on stderr, so nobody prices with it unknowingly."""
    costs = measure_costs(decoder, sizes)
    if costs.warnings:
        costs = min(costs, measure_costs(decoder, sizes, seed=1), key=lambda table: len(table.warnings))
    if costs.warnings:
        warnings.warn(f"the cost table of {where} measured flagged twice "
                      f"({'; '.join(costs.warnings)}); it is kept with its warnings, and "
                      "modelled times priced with it can be off: measure on a quiet machine "
                      "(`specpolicy bench latency --out FILE`, then --costs FILE)", stacklevel=3)
    return costs


def run_sweep(
    settings: SweepSettings,
    out: str,
    prompts: Sequence[Prompt],
    pair=None,
    on_progress: Callable[[int, int], None] | None = None,
    wait: Callable[[Path], None] | None = None,
) -> SweepStore:
    """Sweep ``prompts`` into the store at ``out``; finished prompts are skipped (resume). ``wait``: block
    while another process writes there (told the path) instead of failing."""
    settings.validate()
    _check_prompts(prompts)
    meta = settings.meta()
    check_resumable(out, meta)  # before any model loads
    from specpolicy.models import load_pair

    pin_threads(settings.threads)
    pair = pair or load_pair(settings.target, settings.drafter, settings.dtype, settings.device)
    meta.update({"models": pair.metadata(), "python": platform.python_version(),
                 "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "training_block_size": pair.drafter.block_size})
    store = SweepStore.open(out, meta, wait)
    try:
        decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=settings.temperature,
                                     max_new_tokens=settings.max_new_tokens)
        if _damaged_or_missing_latency(store):
            store.write_latency(_measured_table(decoder, settings.candidates, store.path))
        answer = own_answer(decoder)  # multi-turn prompts: the target's earlier answers, decoded once
        done = _check_unchanged(store, prompts, pair.tokenizer, settings.prompt_tokens(decoder.max_positions),
                                answer)
        todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
        finished = len(prompts) - len(todo)
        if on_progress:
            on_progress(finished, len(prompts))
        for index, prompt in todo:
            record, features = sweep_prompt(decoder, prompt, index, settings, pair.tokenizer, answer)
            store.append(record, features)
            finished += 1
            if on_progress:
                on_progress(finished, len(prompts))
    finally:
        store.close()
    return store
