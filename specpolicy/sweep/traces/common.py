"""What every trace format shares: the import's report, the store's meta, the records a chain trace or a
per-step record becomes, reading a trace file a checked line at a time (errors name file and line)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.sweep.records import RECORD_VERSION, ReplayEntry, SweepRecord, encode_rows, prompt_digest
from specpolicy.sweep.store import SweepStore


@dataclass(frozen=True)
class TraceImport:
    """What an import read: decodes kept, the longest accepted run, SpecDecode-Bench requests whose token
    array is another run's, those skipped, and what replay is exact for."""

    store: SweepStore
    requests: int
    longest_drafts: int
    other_run_tokens: list[str]
    skipped: dict[str, str]
    """request id -> why it was not imported (nothing to replay)"""
    exact_for: str = ""


def store_meta(file: Path | Sequence[Path], dataset: str, form: str, sizes: Sequence[int],
               **more: object) -> dict:
    """An imported store's meta: its file's (or runs' files') digest: another file is refused, not mixed."""
    files = [file] if isinstance(file, Path) else list(file)
    return {"dataset": dataset, "mode": "imported", "source": str(files[0]), "format": form,
            "dataset_sha256": hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16],
            "candidates": list(sizes),
            "target": None, "max_new_tokens": None, "training_block_size": TRAINING_BLOCK_SIZE} | more


def chain_record(prompt_id: str, index: int, drafts: list[int], sizes: Sequence[int], prompt: list[int],
                  category: str) -> SweepRecord:
    """A chain drafter's decode whose draft at position i would have ``drafts[i]`` drafts accepted."""
    entry = ReplayEntry(candidates=tuple(sizes), accepted=[[min(a, sizes[-1] - 1)] for a in drafts],
                        sequence=[],
                        output_length=len(drafts), stop_token_ids=(), budget=len(drafts), chain=True)
    return SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index, prompt_length=len(prompt),
                       prompt_sha256=prompt_digest(prompt), taus=entry.table(len(prompt)).taus(),
                       output_length=len(drafts), replay=entry, category=category)


def per_step_record(index: int, prompt_id: str, lengths: list[int] | Mapping[int, list[int]],
                    category: str | None, group: str, conversation: str, size: int, tokens: int | None = None,
                    confidences: Sequence[Sequence[float]] | None = None) -> SweepRecord:
    """A decode whose steps committed ``lengths`` tokens: the prefill's token, then a step at every anchor the
    recorded run reached (accepted drafts there; -1 elsewhere) at ``size`` (runs at several: ``{B: runs}``),
    the output cut at ``tokens`` (else the shortest run's). ``confidences`` [steps, size - 1]: a calibration
    bank's rounds, each with the drafter's confidences, replayed on their own (:attr:`ReplayEntry.rounds`)."""
    runs = dict(sorted(lengths.items())) if isinstance(lengths, Mapping) else {size: lengths}
    output, columns = max(1 + sum(run) for run in runs.values()), []
    for run in runs.values():
        accepted, anchor, anchors = [-1] * output, 0, []
        for committed in run:
            accepted[anchor], anchor = committed - 1, anchor + committed
            anchors.append(anchor - committed)
        columns.append(accepted)
    rows = {}
    if confidences is not None:
        import numpy as np

        rows = {size: np.full((output, size - 1), np.nan, np.float32)}
        rows[size][anchors] = confidences
    budget = min(tokens or output, *(1 + sum(run) for run in runs.values()))
    entry = ReplayEntry(candidates=tuple(runs), accepted=[list(row) for row in zip(*columns)], sequence=[],
                        output_length=output, stop_token_ids=(), budget=budget, chain=len(runs) == 1 or None,
                        confidences=encode_rows(rows), rounds=confidences is not None or None)
    return SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index,  # split by request
                       taus=entry.table(0).taus(), output_length=output, replay=entry,
                       category=category, group=group, conversation=conversation, training_block_size=size)


def json_line(file: Path, line_number: int, line: bytes) -> tuple[dict, str]:
    """One JSONL line's object and where it is; a ValueError naming a damaged line."""
    where = f"{file}, line {line_number}"
    try:
        body = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{where} is not JSON; the file is damaged (fetch or write it again)") from None
    if not isinstance(body, dict):
        raise ValueError(f"{where} holds a JSON {type(body).__name__}, not an object; the file is damaged")
    return body, where


def request_id(body: dict, key: str, where: str) -> str:
    """``body[key]`` (a KeyError where it lacks one) as text; an empty, null or nested id refused."""
    value = body[key]
    if value is None or value == "" or isinstance(value, dict | list | bool):
        raise ValueError(f"{where}: {key} is {value!r}; every record needs an id of its own (a string or "
                         "number)")
    return str(value)


def jsonl_lines(file: Path) -> list[tuple[int, bytes]]:
    """(line number, line) of every non-blank line of a JSONL file (read whole, the file closed)."""
    return [(n, line) for n, line in enumerate(file.read_bytes().splitlines(), 1) if line.strip()]


def counts(values: object, least: int, most: int | None = None) -> bool:
    """Whether ``values`` is a list of integers in ``least``..``most`` (no upper bound without ``most``)."""
    return isinstance(values, list) and all(type(v) is int and least <= v <= (most or v) for v in values)


def first_object(file: Path) -> dict:
    """The first JSON object of a JSONL file, or the whole file's (a pretty-printed profile); else {}."""
    with file.open("rb") as lines:
        first = next((line for line in lines if line.strip()), b"")
    for text in (first, file.read_bytes()):
        try:
            body = json.loads(text)
            return body if isinstance(body, dict) else {}
        except (UnicodeDecodeError, ValueError):
            continue
    return {}


def trace_file(file: str | Path, example: str) -> Path:
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is {'a folder' if file.exists() else 'missing'}; pass {example} "
                                "(docs: importing traces)")
    return file
