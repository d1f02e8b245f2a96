"""Importers of real models' acceptance traces into a sweep store, one per format, each saying what replay is exact
for: per-position counterfactuals (SpecDecode-Bench), per-step records (Spec-Bench answers, vLLM's per-request
metrics) and per-position acceptance profiles (Model-Optimizer's ``speculation_profile.json``, drawn with a seed)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specpolicy.defaults import MAX_BLOCK_SIZE, MAX_DRAWN_POSITIONS, PROFILE_DRAW, TRAINING_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.trace_formats import (
    chain_record,
    first_object,
    jsonl_lines,
    per_step_record,
    read_profile,
    spec_bench_answer,
    specdecode_request,
    trace_file,
    vllm_response,
)

SPECDECODE_DRAFTERS = ("eagle", "ngram")
"""the chain drafters a SpecDecode-Bench trace records (``acc_eagle``: EAGLE-3, ``acc_ngram``: n-gram lookup)"""


@dataclass(frozen=True)
class TraceImport:
    """What an import read: decodes kept, the longest accepted run, SpecDecode-Bench requests whose token array is
    another run's, those skipped, and what replay is exact for."""

    store: SweepStore
    requests: int
    longest_drafts: int
    other_run_tokens: list[str]
    skipped: dict[str, str]
    """request id -> why it was not imported (nothing to replay)"""
    exact_for: str = ""


@dataclass(frozen=True)
class ProfileDraw:
    """How many decodes of how many tokens are drawn from a speculation profile, and the seed of the draw."""

    requests: int = PROFILE_DRAW[0]
    tokens: int = PROFILE_DRAW[1]
    seed: int = 0


def import_traces(file: str | Path, out: str | Path, drafter: str = "eagle", candidates: Sequence[int] | None = None,
                  dataset: str | None = None, draw: ProfileDraw = ProfileDraw()) -> TraceImport:
    """A trace file of any format, told apart by its first object: a speculation profile (:func:`import_profile`),
    vLLM responses (:func:`import_vllm`) or Spec-Bench answers (:func:`import_spec_bench`), both at the one block
    size ``candidates`` names, or SpecDecode-Bench's per-position JSONL (:func:`import_specdecode`)."""
    file = trace_file(file, "a SpecDecode-Bench trace, a Spec-Bench answer file, vLLM responses or a "
                             "speculation_profile.json")
    first = first_object(file)
    if "conditional_accept_rates" in first:
        return import_profile(file, out, candidates, dataset, draw)
    per_step = import_spec_bench if "question_id" in first else import_vllm if {"metrics", "choices"} & set(first) \
        else None
    if per_step is None:
        return import_specdecode(file, out, drafter, candidates, dataset)
    if candidates is not None and len(candidates) != 1:
        raise ValueError(f"{file} holds per-step records of one run: pass the one block size it drafted as "
                         f"--candidates N (default: the run's), not {list(candidates)}")
    return per_step(file, out, candidates[0] if candidates else None, dataset)


def import_specdecode(file: str | Path, out: str | Path, drafter: str = "eagle",
                      candidates: Sequence[int] | None = None, dataset: str | None = None) -> TraceImport:
    """Read a SpecDecode-Bench trace (JSONL: ``id``, ``prompt_token_ids``, ``generated_token_ids``,
    ``acc_{drafter}.acc_len``) into chain replay tables: a block of B accepts min(acc_len[i] - 1, B - 1) at
    position i, exact for B up to the longest accepted run recorded (larger B refused). The acceptance array
    defines the decode; a token array of another length (another run) is counted in ``other_run_tokens``.
    ``candidates`` default: 1 up to the training block size or the longest recorded block."""
    if drafter not in SPECDECODE_DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; the traces record {', '.join(SPECDECODE_DRAFTERS)}")
    file = trace_file(file, "a SpecDecode-Bench file such as data/llama3.1-8B/combined_gsm8k.jsonl")
    dataset = dataset or file.stem.removeprefix("combined_")
    requests = [specdecode_request(file, n, line, drafter) for n, line in jsonl_lines(file)]
    if not requests:
        raise ValueError(f"{file} holds no requests; pass a SpecDecode-Bench trace file (one JSON object a line)")
    longest = max((max(a, default=1) for _, _, _, a in requests), default=1) - 1
    candidates = range(1, min(TRAINING_BLOCK_SIZE, longest + 1) + 1) if candidates is None else candidates
    too_long = [b for b in candidates if b - 1 > longest]
    if too_long:
        raise ValueError(f"{file}: the longest accepted run is {longest} drafts, so blocks {too_long} cannot be "
                         f"replayed exactly (their drafts past {longest} were never recorded); pass --candidates "
                         f"1-{longest + 1} or fewer")
    sizes = tuple(sorted(candidates))
    skipped = {r: "the prefill's token is the whole output: nothing to draft" for r, _, _, a in requests if len(a) < 2}
    store = SweepStore.fill(out, _meta(file, dataset, "specdecode-bench", sizes, drafter=drafter,
                                             drafter_kind="chain"), (
        chain_record(f"{dataset}:{request}", index, [a - 1 for a in lengths], sizes, prompt, dataset)
        for index, (request, prompt, _, lengths) in enumerate(requests) if request not in skipped))
    other = [r for r, _, tokens, lengths in requests if r not in skipped and len(tokens) != len(lengths)]
    return TraceImport(store, len(requests) - len(skipped), longest, other, skipped,
                       f"block sizes {sizes[0]}..{sizes[-1]} (chain drafts: a prefix of the longest at each B)")


def import_spec_bench(file: str | Path, out: str | Path, block_size: int | None = None,
                      dataset: str | None = None) -> TraceImport:
    """Read Spec-Bench answers (JSONL: ``question_id``, ``category``, ``choices[0]`` with ``new_tokens`` per turn
    and ``accept_lengths`` per step, each the tokens that step committed) into replay tables of the recorded
    decode, a prompt per turn (``ID``, ``ID:2``, one conversation). Each step replays exactly at the one block
    size the run drafted (``block_size``, at least its longest step; default that): another block size would
    visit other positions, which a per-step record never saw, so the store holds that one candidate."""
    file = trace_file(file, "a Spec-Bench answer file such as data/spec_bench/model_answer/MODEL.jsonl")
    from specpolicy.data.builtin import SPEC_BENCH_GROUPS

    dataset = dataset or file.stem
    answers = [spec_bench_answer(file, n, line) for n, line in jsonl_lines(file)]
    if not answers:
        raise ValueError(f"{file} holds no answers; pass a Spec-Bench answer file (one JSON object a line)")
    longest = max(max(turn, default=1) for _, _, turns in answers for turn in turns)
    size = longest if block_size is None else int(block_size)
    if not longest <= size <= MAX_BLOCK_SIZE:
        raise ValueError(f"{file}: a step committed {longest} tokens, so the run drafted blocks of at least "
                         f"{longest}; pass --candidates {longest} (or the run's larger block, up to {MAX_BLOCK_SIZE})")
    decodes = [(f"{dataset}:{question}" + (f":{turn}" if turn > 1 else ""), lengths, category,
                SPEC_BENCH_GROUPS.get(category or "", "multi-turn"), f"{dataset}:{question}")
               for question, category, turns in answers for turn, lengths in enumerate(turns, 1)]
    skipped = {decode[0]: "no step recorded: nothing to replay" for decode in decodes if not decode[1]}
    store = SweepStore.fill(out, _meta(file, dataset, "spec-bench-answers", [size], training_block_size=size), (
        per_step_record(index, *decode, size=size) for index, decode in enumerate(decodes) if decode[1]))
    return TraceImport(store, len(decodes) - len(skipped), longest - 1, [], skipped,
                       f"the recorded decode at B = {size} only (per-step records: other blocks visit other positions)")


def import_vllm(file: str | Path, out: str | Path, block_size: int | None = None,
                dataset: str | None = None) -> TraceImport:
    """Read vLLM responses (JSONL, from a server started with ``--per-request-spec-decode-metrics detailed``):
    ``metrics.speculative_decoding`` holds ``per_step_accepted`` / ``per_step_drafted`` per step and
    ``num_spec_tokens`` K. As Spec-Bench answers, the recorded decode replays exactly at B = K + 1 only; steps
    that drafted fewer than K (an n-gram lookup without a match, dynamic SD) replay as recorded and are counted."""
    file = trace_file(file, "a JSONL of vLLM responses carrying metrics.speculative_decoding")
    dataset = dataset or file.stem
    responses = [vllm_response(file, n, line) for n, line in jsonl_lines(file)]
    drafts = {r.k for r in responses if r.k}
    if len(drafts) != 1:
        raise ValueError(f"{file}: " + (f"runs of num_spec_tokens {sorted(drafts)} are mixed; import one run a file"
                                        if drafts else "no response carries speculative decoding metrics"))
    k = drafts.pop()
    if block_size not in (None, k + 1):
        raise ValueError(f"{file}: the run drafted num_spec_tokens = {k}, a block of {k + 1}; pass --candidates "
                         f"{k + 1} or leave it out")
    skipped = {r.id: "no speculative decoding metrics (n > 1, or nothing drafted)" for r in responses if not r.steps}
    store = SweepStore.fill(out, _meta(file, dataset, "vllm-per-request", [k + 1], training_block_size=k + 1), (
        per_step_record(index, f"{dataset}:{r.id}", [a + 1 for a, _ in r.steps], None, dataset, f"{dataset}:{r.id}",
                        size=k + 1, tokens=r.tokens) for index, r in enumerate(responses) if r.steps))
    steps = [step for r in responses for step in r.steps or ()]
    return TraceImport(store, len(responses) - len(skipped), max((a for a, _ in steps), default=0), [], skipped,
                       f"the recorded decode at B = {k + 1} only (per-step records; {sum(d < k for _, d in steps)} "
                       f"of {len(steps)} steps drafted fewer than {k} and replay as recorded)")


def import_profile(file: str | Path, out: str | Path, candidates: Sequence[int] | None = None,
                   dataset: str | None = None, draw: ProfileDraw = ProfileDraw()) -> TraceImport:
    """Draw decodes from Model-Optimizer's ``speculation_profile.json`` (``conditional_accept_rates``: P(draft i + 1
    accepted | the first i were), measured at ``num_speculative_tokens`` K): at every position independently, drafts
    are accepted while a seeded uniform falls below the next rate. A chain drafter's profile (``accept_length_model:
    chain_analytic``) covers every block 1..K + 1, another (``measured_per_k``: DFlash, DSpark) the block K + 1 only.
    Positions are independent, so what per-prompt or per-step choice gains on a draw is the draw's noise."""
    file = trace_file(file, "a speculation_profile.json (Model-Optimizer's specdec_bench writes one)")
    if draw.requests < 1 or draw.tokens < 2 or draw.requests * draw.tokens > MAX_DRAWN_POSITIONS:
        raise ValueError(f"a draw of --requests {draw.requests} x --tokens {draw.tokens} positions is outside 1 x 2 .. "
                         f"{MAX_DRAWN_POSITIONS:,} positions; pass fewer --tokens or --requests")
    profile, k, rates = read_profile(file)
    chain = profile.get("accept_length_model") == "chain_analytic"
    covered = tuple(range(1, k + 2)) if chain else (k + 1,)
    if candidates is not None and not set(candidates) <= set(covered):
        what, span = ("chain", f"blocks 1..{k + 1}") if chain else \
            (f"{profile.get('method') or 'block'} drafter's", f"block {k + 1} only")
        raise ValueError(f"{file}: a {what} profile at K = {k} covers {span}; pass --candidates within it or leave "
                         "it out")
    sizes = covered if candidates is None else tuple(sorted(candidates))
    dataset = dataset or file.parent.name or file.stem
    rng = np.random.default_rng(draw.seed)
    meta = _meta(file, dataset, "speculation-profile", sizes, seed=draw.seed, requests=draw.requests,
                 tokens=draw.tokens, drafter_kind="chain" if chain else "block")
    store = SweepStore.fill(out, meta, (
        chain_record(f"{dataset}:{r}", r, np.cumprod(rng.random((draw.tokens, k)) < rates, 1).sum(1).tolist(), sizes,
                     [], dataset) for r in range(draw.requests)))
    return TraceImport(store, draw.requests, k, [], {}, f"block sizes {sizes[0]}..{sizes[-1]} as drawn from the "
                       f"profile (seed {draw.seed}, {draw.requests} decodes of {draw.tokens} tokens; positions drawn "
                       "independently: oracle gains over fixed sizes are the draw's noise)")


def _meta(file: Path, dataset: str, form: str, sizes: Sequence[int], **more: object) -> dict:
    """An imported store's meta: the file's digest (another file of the same name is refused, never mixed in)."""
    return {"dataset": dataset, "mode": "imported", "source": str(file), "format": form,
            "dataset_sha256": hashlib.sha256(file.read_bytes()).hexdigest()[:16], "candidates": list(sizes),
            "target": None, "max_new_tokens": None, "training_block_size": TRAINING_BLOCK_SIZE} | more
