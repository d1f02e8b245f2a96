"""Importers of published per-prompt results into a sweep store."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE, PAPER_CANDIDATES, TRAINING_BLOCK_SIZE
from specpolicy.files import write_text
from specpolicy.sweep.records import RECORD_VERSION, ReplayEntry, SweepRecord, prompt_digest
from specpolicy.sweep.store import SweepStore

BLOCKPILOT_FOLDER = re.compile(r"(?P<dataset>.+)_(?P<seed>\d+)T(?P<temperature>[0-9.]+)$")


def import_blockpilot(folder: str | Path, out: str | Path, candidates: Sequence[int] | None = PAPER_CANDIDATES
                      ) -> tuple[SweepStore, dict[str, int]]:
    """Read the BlockPilot authors' ``{dataset}_{seed}T{temperature}/{B}.json`` (index -> mean tau) into a store
    without features; ``1.json`` (their predictor's choices) is saved as ``authors_choices.json``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is {'a file' if folder.exists() else 'missing'}; pass the authors' folder "
                                "{dataset}_{seed}T{temperature} that holds their {B}.json files")
    match = BLOCKPILOT_FOLDER.match(folder.name)
    if match is None:
        raise ValueError(f"folder {str(folder)!r}: its name {folder.name!r} does not look like the authors' "
                         "'{dataset}_{seed}T{temperature}' (e.g. gsm8k_0T0.0)")
    available = {int(f.stem): f for f in folder.glob("*.json") if f.stem.isdigit() and f.stem != "1"}
    beyond = sorted(size for size in available if size > MAX_BLOCK_SIZE)
    if beyond:
        raise ValueError(f"{folder} has {', '.join(f'{b}.json' for b in beyond)}: block sizes above {MAX_BLOCK_SIZE}, "
                         "which no DFlash engine runs; remove them or check the folder")
    if not available:
        raise FileNotFoundError(f"no '{{B}}.json' files in {folder}")
    kept = sorted(available) if candidates is None else sorted(set(candidates) & set(available))
    if not kept:
        raise ValueError(f"{folder} has block sizes {sorted(available)}, none of {sorted(candidates)}; pass "
                         f"--candidates from those")
    taus = {size: _taus(available[size]) for size in kept}
    prompts = set(next(iter(taus.values())))
    for size, values in taus.items():
        if set(values) != prompts:
            raise ValueError(f"{folder / f'{size}.json'} covers other prompts than the other block sizes")
    files = [available[size] for size in kept] + [f for f in [folder / "1.json"] if f.exists()]
    digest = hashlib.sha256(b"".join(f.name.encode() + b"\0" + f.read_bytes() for f in files)).hexdigest()[:16]
    meta = {"dataset": match["dataset"], "seed": int(match["seed"]), "temperature": float(match["temperature"]),
            "dataset_sha256": digest,  # a changed or other folder of the same name is refused, never mixed in
            "candidates": kept, "mode": "imported", "max_new_tokens": None, "target": None,
            "drafter": None, "source": str(folder), "training_block_size": TRAINING_BLOCK_SIZE}
    store = SweepStore.open(out, meta)
    done = store.done_ids()
    for index in sorted(prompts, key=int):
        prompt_id = f"{match['dataset']}:{index}"
        if prompt_id not in done:
            store.append(SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=int(index),
                                     taus={b: taus[b][index] for b in kept}))
    choices = {f"{match['dataset']}:{k}": int(v) for k, v in _taus(folder / "1.json").items()} \
        if (folder / "1.json").exists() else {}
    if choices:
        write_text(store.path / "authors_choices.json", json.dumps(choices, indent=1))
    store.close()
    return store, choices


def agreement(store: SweepStore, choices: dict[str, int]) -> tuple[int, int]:
    """(prompts whose chosen size has the best tau of the store's candidates, ties included; prompts)."""
    records = list(store.records())
    hits = sum(r.taus.get(choices.get(r.prompt_id, -1), -1.0) >= max(r.taus.values()) for r in records)
    return hits, len(records)


def _taus(file: Path) -> dict[str, float]:
    """One ``{B}.json``: prompt index (a string) -> mean tau; a ValueError naming the file otherwise."""
    try:
        body = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{file} is not JSON ({error})") from None
    if not isinstance(body, dict):
        raise ValueError(f"{file} holds a JSON {type(body).__name__}; expected an object mapping prompt index to tau")
    try:
        return {str(k): float(v) for k, v in body.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{file} maps a prompt to something that is not a number") from None


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


def import_specdecode(file: str | Path, out: str | Path, drafter: str = "eagle",
                      candidates: Sequence[int] | None = None, dataset: str | None = None) -> TraceImport:
    """Read a SpecDecode-Bench trace (JSONL: ``id``, ``prompt_token_ids``, ``generated_token_ids``,
    ``acc_{drafter}.acc_len``) into chain replay tables: a block of B accepts min(acc_len[i] - 1, B - 1) at
    position i, exact for B up to the longest accepted run recorded (larger B refused). The acceptance array
    defines the decode; a token array of another length (another run) is counted in ``other_run_tokens``.
    ``candidates`` default: 1 up to the training block size or the longest recorded block."""
    if drafter not in SPECDECODE_DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; the traces record {', '.join(SPECDECODE_DRAFTERS)}")
    file = _trace_file(file, "a SpecDecode-Bench file such as data/llama3.1-8B/combined_gsm8k.jsonl")
    dataset = dataset or file.stem.removeprefix("combined_")
    requests = [_specdecode_request(file, n, line, drafter) for n, line in enumerate(file.open("rb"), 1)
                if line.strip()]
    if not requests:
        raise ValueError(f"{file} holds no requests; pass a SpecDecode-Bench trace file (one JSON object a line)")
    ids = [r[0] for r in requests]
    if len(set(ids)) < len(ids):
        raise ValueError(f"{file} repeats request ids ({sorted({i for i in ids if ids.count(i) > 1})[:3]}); "
                         "pass one trace file per dataset")
    longest = max((max(a, default=1) for _, _, _, a in requests), default=1) - 1
    candidates = range(1, min(TRAINING_BLOCK_SIZE, longest + 1) + 1) if candidates is None else candidates
    too_long = [b for b in candidates if b - 1 > longest]
    if too_long:
        raise ValueError(f"{file}: the longest accepted run is {longest} drafts, so blocks {too_long} cannot be "
                         f"replayed exactly (their drafts past {longest} were never recorded); pass --candidates "
                         f"1-{longest + 1} or fewer")
    sizes = tuple(sorted(candidates))
    meta = {"dataset": dataset, "mode": "imported", "source": str(file), "format": "specdecode-bench",
            "dataset_sha256": hashlib.sha256(file.read_bytes()).hexdigest()[:16], "drafter": drafter,
            "candidates": list(sizes), "target": None, "max_new_tokens": None,
            "training_block_size": TRAINING_BLOCK_SIZE}
    store, skipped, other = SweepStore.open(out, meta), {}, []
    done = store.done_ids()
    for index, (request, prompt, tokens, lengths) in enumerate(requests):
        if len(lengths) < 2:  # the prefill's token is the whole output: no cycle to replay
            skipped[request] = "the prefill's token is the whole output: nothing to draft"
            continue
        other += [request] if len(tokens) != len(lengths) else []
        prompt_id = f"{dataset}:{request}"
        if prompt_id in done:
            continue
        entry = ReplayEntry(candidates=sizes, accepted=[[min(a, sizes[-1]) - 1] for a in lengths], sequence=[],
                            output_length=len(lengths), stop_token_ids=(), budget=len(lengths), chain=True)
        table = entry.table(len(prompt))
        store.append(SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index, prompt_length=len(prompt),
                                 prompt_sha256=prompt_digest(prompt), taus=table.taus(),
                                 output_length=len(lengths), replay=entry, category=dataset))
    store.close()
    return TraceImport(store, len(requests) - len(skipped), longest, other, skipped,
                       f"block sizes {sizes[0]}..{sizes[-1]} (chain drafts: a prefix of the longest at each B)")


def _specdecode_request(file: Path, line_number: int, line: bytes, drafter: str
                        ) -> tuple[str, list[int], list[int], list[int]]:
    """(id, prompt ids, generated ids, acceptance lengths) of one line; a ValueError naming the line otherwise."""
    where = f"{file}, line {line_number}"
    try:
        body = json.loads(line)
        request = str(body["id"])
        prompt, tokens = body["prompt_token_ids"], body.get("generated_token_ids", [])
        lengths = body[f"acc_{drafter}"]["acc_len"]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{where} is not JSON; the file is damaged (fetch it again)") from None
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a SpecDecode-Bench trace with acc_{drafter}.acc_len "
                         "(docs: importing traces)") from None
    for name, values, least in (("prompt_token_ids", prompt, 0), ("generated_token_ids", tokens, 0),
                                (f"acc_{drafter}.acc_len", lengths, 1)):
        if not isinstance(values, list) or not all(type(v) is int and v >= least for v in values):
            why = " (tokens committed per draft: its accepted drafts + the target's own)" if least else ""
            raise ValueError(f"{where} (request {request}): {name} must be a list of integers >= {least}{why}")
    return request, prompt, tokens, lengths


def import_traces(file: str | Path, out: str | Path, drafter: str = "eagle", candidates: Sequence[int] | None = None,
                  dataset: str | None = None) -> TraceImport:
    """A trace file of either format, told apart by its first line: Spec-Bench answers (``choices``, per-step
    accepted lengths: :func:`import_spec_bench` at the one block size ``candidates`` names) or SpecDecode-Bench's
    per-position acceptance (:func:`import_specdecode`)."""
    file = _trace_file(file, "a SpecDecode-Bench trace or a Spec-Bench answer file")
    with file.open("rb") as lines:
        first = next((line for line in lines if line.strip()), b"")
    try:
        answers = "choices" in json.loads(first)
    except (ValueError, TypeError):
        answers = False  # the importer names the damaged line
    if not answers:
        return import_specdecode(file, out, drafter, candidates, dataset)
    if candidates is not None and len(candidates) != 1:
        raise ValueError(f"{file} holds Spec-Bench answers, per-step records of one run: pass the one block size it "
                         f"drafted as --candidates N (default: its longest step), not {list(candidates)}")
    return import_spec_bench(file, out, candidates[0] if candidates else None, dataset)


def import_spec_bench(file: str | Path, out: str | Path, block_size: int | None = None,
                      dataset: str | None = None) -> TraceImport:
    """Read Spec-Bench answers (JSONL: ``question_id``, ``category``, ``choices[0]`` with ``new_tokens`` per turn
    and ``accept_lengths`` per step, each the tokens that step committed) into replay tables of the recorded
    decode, a prompt per turn (``ID``, ``ID:2``, one conversation). Each step replays exactly at the one block
    size the run drafted (``block_size``, at least its longest step; default that): another block size would
    visit other positions, which a per-step record never saw, so the store holds that one candidate."""
    file = _trace_file(file, "a Spec-Bench answer file such as data/spec_bench/model_answer/MODEL.jsonl")
    from specpolicy.data.builtin import SPEC_BENCH_GROUPS

    dataset = dataset or file.stem
    answers = [_spec_bench_answer(file, n, line) for n, line in enumerate(file.open("rb"), 1) if line.strip()]
    if not answers:
        raise ValueError(f"{file} holds no answers; pass a Spec-Bench answer file (one JSON object a line)")
    longest = max(max(turn, default=1) for _, _, turns in answers for turn in turns)
    size = longest if block_size is None else int(block_size)
    if not longest <= size <= MAX_BLOCK_SIZE:
        raise ValueError(f"{file}: a step committed {longest} tokens, so the run drafted blocks of at least "
                         f"{longest}; pass --candidates {longest} (or the run's larger block, up to {MAX_BLOCK_SIZE})")
    meta = {"dataset": dataset, "mode": "imported", "source": str(file), "format": "spec-bench-answers",
            "dataset_sha256": hashlib.sha256(file.read_bytes()).hexdigest()[:16], "candidates": [size],
            "target": None, "max_new_tokens": None, "training_block_size": size}
    store, skipped, index = SweepStore.open(out, meta), {}, 0
    done = store.done_ids()
    for question, category, turns in answers:
        for turn, lengths in enumerate(turns, 1):
            prompt_id = f"{dataset}:{question}" + (f":{turn}" if turn > 1 else "")
            index += 1
            if not lengths:
                skipped[prompt_id] = "no step recorded: nothing to replay"
                continue
            if prompt_id in done:
                continue
            store.append(_per_step_record(prompt_id, index - 1, lengths, size, category,
                                          SPEC_BENCH_GROUPS.get(category or "", "multi-turn"), f"{dataset}:{question}"))
    store.close()
    return TraceImport(store, index - len(skipped), longest - 1, [], skipped,
                       f"the recorded decode at B = {size} only (per-step records: other blocks visit other positions)")


def _per_step_record(prompt_id: str, index: int, lengths: list[int], size: int, category: str | None,
                     group: str, conversation: str) -> SweepRecord:
    """A decode whose steps committed ``lengths`` tokens: the prefill's token, then a step at every anchor the
    recorded run reached (accepted drafts there; -1, unreached, elsewhere), at the one block size ``size``."""
    accepted, anchor = [-1] * (1 + sum(lengths)), 0
    for committed in lengths:
        accepted[anchor], anchor = committed - 1, anchor + committed
    entry = ReplayEntry(candidates=(size,), accepted=[[a] for a in accepted], sequence=[], output_length=len(accepted),
                        stop_token_ids=(), budget=len(accepted), chain=True)
    return SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index, prompt_sha256=prompt_digest([]),
                       taus=entry.table(0).taus(), output_length=len(accepted), replay=entry, category=category,
                       group=group, conversation=conversation, training_block_size=size)


def _spec_bench_answer(file: Path, line_number: int, line: bytes) -> tuple[str, str | None, list[list[int]]]:
    """(question id, category, the committed tokens of every step, per turn) of one answer; a ValueError naming the
    line otherwise. Steps split into turns by ``new_tokens`` (a turn's steps commit exactly its new tokens)."""
    where = f"{file}, line {line_number}"
    try:
        body = json.loads(line)
        question, choice = str(body["question_id"]), body["choices"][0]
        steps, per_turn = choice["accept_lengths"], choice["new_tokens"]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{where} is not JSON; the file is damaged (write it again)") from None
    except (KeyError, TypeError, IndexError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a Spec-Bench answer with choices[0].accept_lengths "
                         "and new_tokens (docs: importing traces)") from None
    for name, values, least in (("accept_lengths", steps, 1), ("new_tokens", per_turn, 0)):
        if not isinstance(values, list) or not all(type(v) is int and v >= least for v in values):
            raise ValueError(f"{where} (question {question}): {name} must be a list of integers >= {least}")
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
        raise ValueError(f"{where} (question {question}): its accept_lengths ({sum(steps)} tokens in {len(steps)} "
                         f"steps) do not split into its turns' new_tokens {per_turn}; the answer is damaged")
    return question, body.get("category"), turns


def _trace_file(file: str | Path, example: str) -> Path:
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is {'a folder' if file.exists() else 'missing'}; pass {example} "
                                "(docs: importing traces)")
    return file
