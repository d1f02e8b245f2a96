"""Spec-Bench answers (``evaluation/eval.py`` of hemingkx/Spec-Bench): per answer, ``choices[0]`` holds
``new_tokens`` per turn and ``accept_lengths`` per step; a recorded decode replays exactly at its block."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import common

FORMAT = "spec-bench-answers"


@dataclass(frozen=True)
class SpecBenchAnswer:
    """One answer: its question id, category, and the tokens every step committed, per turn."""

    question: str
    category: str | None
    turns: list[list[int]]


def spec_bench_answer(file: Path, line_number: int, line: bytes) -> SpecBenchAnswer:
    """One answer's :class:`SpecBenchAnswer`; a ValueError naming the line otherwise. Steps split into turns
    by ``new_tokens`` (a turn's steps commit exactly its new tokens)."""
    body, where = common.json_line(file, line_number, line)
    try:
        question, choice = common.request_id(body, "question_id", where), body["choices"][0]
        steps, per_turn = choice["accept_lengths"], choice["new_tokens"]
    except (KeyError, TypeError, IndexError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a Spec-Bench answer with "
                         "choices[0].accept_lengths and new_tokens (docs: importing traces)") from None
    for name, values, least in (("accept_lengths", steps, 1), ("new_tokens", per_turn, 0)):
        if not common.counts(values, least):
            raise ValueError(f"{where} (question {question}): {name} must be a list of integers >= {least}")
    if not per_turn:
        raise ValueError(f"{where} (question {question}): new_tokens is empty, an answer with no turns; the "
                         "answer is damaged")
    turns, start = [], 0
    for tokens in per_turn:
        end, total = start, 0
        while total < tokens and end < len(steps):
            total, end = total + steps[end], end + 1
        if total != tokens:
            break
        turns.append(steps[start:end])
        start = end
    if start != len(steps) or len(turns) != len(per_turn):
        raise ValueError(f"{where} (question {question}): its accept_lengths ({sum(steps)} tokens in "
                         f"{len(steps)} steps) do not split into its turns' new_tokens {per_turn}; the "
                         "answer is damaged")
    return SpecBenchAnswer(question, body.get("category"), turns)


def import_spec_bench(file: str | Path, out: str | Path, block_size: int | None = None,
                      dataset: str | None = None) -> common.TraceImport:
    """Read Spec-Bench answers (JSONL: ``question_id``, ``category``, ``choices[0]`` with ``new_tokens`` per
    turn and ``accept_lengths`` per step, each the tokens that step committed) into replay tables of the
    recorded decode, a prompt per turn (``ID``, ``ID:2``, one conversation). Each step replays exactly at the
    one block the run drafted (``block_size``, at least its longest step; default that) only: another would
    visit positions no per-step record saw."""
    file = common.trace_file(file, "a Spec-Bench answer file: data/spec_bench/model_answer/MODEL.jsonl")
    from specpolicy.data.builtin import SPEC_BENCH_GROUPS

    dataset = dataset or file.stem
    answers = [spec_bench_answer(file, n, line) for n, line in common.jsonl_lines(file)]
    if not answers:
        raise ValueError(f"{file} holds no answers; pass a Spec-Bench answer file (one JSON object a line)")
    longest = max(max(turn, default=1) for answer in answers for turn in answer.turns)
    size = longest if block_size is None else int(block_size)
    if not longest <= size <= MAX_BLOCK_SIZE:
        raise ValueError(f"{file}: a step committed {longest} tokens, so the run drafted blocks of at least "
                         f"{longest}; pass --candidates {longest} (or the run's larger block, up to "
                         f"{MAX_BLOCK_SIZE})")
    decodes = [(f"{dataset}:{a.question}" + (f":{turn}" if turn > 1 else ""), lengths, a.category,
                SPEC_BENCH_GROUPS.get(a.category or "", "multi-turn"), f"{dataset}:{a.question}")
               for a in answers for turn, lengths in enumerate(a.turns, 1)]
    skipped = {decode[0]: "no step recorded: nothing to replay" for decode in decodes if not decode[1]}
    meta = common.store_meta(file, dataset, FORMAT, [size], training_block_size=size)
    store = SweepStore.fill(out, meta, (common.per_step_record(index, *decode, size=size)
                                        for index, decode in enumerate(decodes) if decode[1]))
    return common.TraceImport(store, len(decodes) - len(skipped), longest - 1, [], skipped,
                              f"the recorded decode at B = {size} only (per-step records: other blocks visit "
                              "other positions)")
