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
    """Read the BlockPilot authors' ``{dataset}_{seed}T{temperature}/{B}.json`` (prompt index -> mean tau) into
    a store without features. ``candidates``: the sizes kept (default 14..18; ``None``: all), each covering the
    same prompts; ``1.json`` holds their predictor's choices (returned by id, saved as ``authors_choices.json``)."""
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
    """What :func:`import_specdecode` read: requests kept, the longest accepted run, and the requests whose
    token array belongs to another run than the acceptance array (kept: the acceptance array alone decides)."""

    store: SweepStore
    requests: int
    longest_drafts: int
    other_run_tokens: list[str]
    skipped: dict[str, str]
    """request id -> why it was not imported (nothing to replay)"""


def import_specdecode(file: str | Path, out: str | Path, drafter: str = "eagle",
                      candidates: Sequence[int] | None = None, dataset: str | None = None) -> TraceImport:
    """Read a SpecDecode-Bench trace (JSONL: ``id``, ``prompt_token_ids``, ``generated_token_ids``,
    ``acc_{drafter}.acc_len``) into chain replay tables: a block of B accepts min(acc_len[i] - 1, B - 1) at
    position i, exact for B up to the longest accepted run recorded (larger B refused). The acceptance array
    defines the decode; a token array of another length (another run) is counted in ``other_run_tokens``.
    ``candidates`` default: 1 up to the training block size or the longest recorded block."""
    file = Path(file)
    if drafter not in SPECDECODE_DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; the traces record {', '.join(SPECDECODE_DRAFTERS)}")
    if not file.is_file():
        raise FileNotFoundError(f"{file} is {'a folder' if file.exists() else 'missing'}; pass a SpecDecode-Bench "
                                "file such as data/llama3.1-8B/combined_gsm8k.jsonl (docs: importing traces)")
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
    return TraceImport(store, len(requests) - len(skipped), longest, other, skipped)


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
