"""Importer of the BlockPilot authors' published per-prompt results into a sweep store."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

from specpolicy.arguments import check_candidate_set
from specpolicy.defaults import MAX_BLOCK_SIZE, PAPER_CANDIDATES, TRAINING_BLOCK_SIZE
from specpolicy.files import check_folder_path, write_text
from specpolicy.sweep.records import RECORD_VERSION, SweepRecord
from specpolicy.sweep.store import SweepStore

BLOCKPILOT_FOLDER = re.compile(r"(?P<dataset>.+)_(?P<seed>\d+)T(?P<temperature>[0-9.]+)$")


def import_blockpilot(folder: str | Path, out: str | Path, candidates: Sequence[int] | None = PAPER_CANDIDATES
                      ) -> tuple[SweepStore, dict[str, int]]:
    """Read the BlockPilot authors' ``{dataset}_{seed}T{temperature}/{B}.json`` (index -> mean tau) into a
    store without features; ``1.json`` (their predictor's choices) is saved as ``authors_choices.json``."""
    folder = Path(folder)
    if candidates is not None:
        candidates = check_candidate_set(candidates, "candidates")
    check_folder_path(out, f"--out {out}", "pass a folder for the sweep store")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is {'a file' if folder.exists() else 'missing'}; pass the "
                                "authors' folder {dataset}_{seed}T{temperature} that holds their "
                                "{B}.json files")
    match = BLOCKPILOT_FOLDER.match(folder.name)
    if match is None:
        raise ValueError(f"folder {str(folder)!r}: its name {folder.name!r} does not look like the authors' "
                         "'{dataset}_{seed}T{temperature}' (e.g. gsm8k_0T0.0)")
    available = {int(f.stem): f for f in folder.glob("*.json") if f.stem.isdigit() and f.stem != "1"}
    beyond = sorted(size for size in available if size > MAX_BLOCK_SIZE)
    if beyond:
        raise ValueError(f"{folder} has {', '.join(f'{b}.json' for b in beyond)}: block sizes above "
                         f"{MAX_BLOCK_SIZE}, which no DFlash engine runs; remove them or check the folder")
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
    digest = hashlib.sha256(b"".join(f.name.encode() + b"\0" + f.read_bytes()
                                     for f in files)).hexdigest()[:16]
    meta = {"dataset": match["dataset"], "seed": int(match["seed"]),
            "temperature": float(match["temperature"]),
            "dataset_sha256": digest,  # a changed or other folder of the same name is refused, never mixed in
            "candidates": kept, "mode": "imported", "max_new_tokens": None, "target": None,
            "drafter": None, "source": str(folder), "training_block_size": TRAINING_BLOCK_SIZE}
    store = SweepStore.fill(out, meta,
                            (SweepRecord(version=RECORD_VERSION, prompt_id=f"{match['dataset']}:{index}",
                                                    index=int(index), taus={b: taus[b][index] for b in kept})
                                        for index in sorted(prompts, key=int)))
    choices = {f"{match['dataset']}:{k}": int(v) for k, v in _taus(folder / "1.json").items()} \
        if (folder / "1.json").exists() else {}
    if choices:
        write_text(store.path / "authors_choices.json", json.dumps(choices, indent=1))
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
        raise ValueError(f"{file} holds a JSON {type(body).__name__}; expected an object mapping prompt "
                         "index to tau")
    try:
        return {str(k): float(v) for k, v in body.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{file} maps a prompt to something that is not a number") from None
