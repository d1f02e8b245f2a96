"""The sweep store: a folder of per-prompt records, append-only, resumable and checksummed.

Layout (schema ``specpolicy.sweep/1``)::

    DIR/meta.json                 settings and provenance (models, dtype, device, seed, candidates, ...)
    DIR/records.jsonl             one JSON record per finished prompt, each with a sha256 ``checksum``
    DIR/features/NNNNNN.safetensors   prefill features of record NNNNNN (``logits``: float16 [V])
    DIR/latency.json              the cost table (draft/verify seconds per block size, AR step) for modelled time

A record is committed by appending its line, after its features file is in place, so a sweep
killed at any point loses no finished prompt and, rerun, duplicates none. A torn last line or a
record whose checksum does not match is reported and skipped, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from specpolicy.costs import CostTable

SCHEMA = "specpolicy.sweep/1"
MATCHING_KEYS = ("candidates", "temperature", "max_new_tokens", "seed", "target", "drafter", "dataset", "mode")
FINGERPRINT_KEYS = ("target_fingerprint", "drafter_fingerprint")


class CorruptRecordWarning(UserWarning):
    """A record in a sweep store failed its checksum or could not be parsed; it was skipped."""


def record_checksum(record: dict) -> str:
    """sha256 of the record's canonical JSON, without its ``checksum`` field."""
    body = {k: v for k, v in record.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class StoreReport:
    """What reading a store found besides good records."""

    corrupted: list[str] = field(default_factory=list)


class SweepStore:
    """A sweep store folder. Create or resume with :meth:`open`; read with :meth:`records`."""

    def __init__(self, path: Path, meta: dict) -> None:
        self.path = Path(path)
        self.meta = meta
        self.report = StoreReport()

    # --- creation and resumption --------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, meta: dict) -> SweepStore:
        """Create ``path`` with ``meta``, or resume it when its settings match ``meta``."""
        path = Path(path)
        meta = {"schema": SCHEMA, **meta}
        meta_file = path / "meta.json"
        if meta_file.exists():
            existing = json.loads(meta_file.read_text())
            diffs = [f"{k}: stored {existing.get(k)!r} vs requested {meta.get(k)!r}"
                     for k in MATCHING_KEYS if existing.get(k) != meta.get(k)]
            stored_models, models = existing.get("models", {}), meta.get("models", {})
            diffs += [f"{k}: stored {stored_models.get(k)} vs loaded {models.get(k)} (other weights under the same "
                      "name)" for k in FINGERPRINT_KEYS if stored_models.get(k) != models.get(k)]
            if diffs:
                raise ValueError(f"{path} holds a sweep with other settings ({'; '.join(diffs)}); "
                                 "pass a new --out folder or the same settings to resume")
            return cls(path, existing)
        path.mkdir(parents=True, exist_ok=True)
        (path / "features").mkdir(exist_ok=True)
        tmp = meta_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
        tmp.replace(meta_file)
        return cls(path, meta)

    @classmethod
    def load(cls, path: str | Path) -> SweepStore:
        """Open an existing store for reading."""
        path = Path(path)
        meta_file = path / "meta.json"
        if not meta_file.exists():
            raise FileNotFoundError(f"{path} is not a sweep store (no meta.json); run `specpolicy sweep --out {path}`")
        meta = json.loads(meta_file.read_text())
        if not str(meta.get("schema", "")).startswith("specpolicy.sweep/"):
            raise ValueError(f"{meta_file} has unknown schema {meta.get('schema')!r}")
        return cls(path, meta)

    @property
    def candidates(self) -> tuple[int, ...]:
        return tuple(int(b) for b in self.meta["candidates"])

    # --- writing ------------------------------------------------------------------------------------

    def append(self, record: dict, features: torch.Tensor | None = None) -> None:
        """Commit one prompt's record (and its features [V]); the line append is the commit point."""
        record = dict(record)
        if features is not None:
            name = f"features/{int(record['index']):06d}.safetensors"
            tmp = self.path / (name + ".tmp")
            save_file({"logits": features.detach().to(torch.float16).contiguous().cpu()}, str(tmp))
            os.replace(tmp, self.path / name)
            record["features"] = name
            record["features_sha256"] = hashlib.sha256((self.path / name).read_bytes()).hexdigest()
        record["checksum"] = record_checksum(record)
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with open(self.path / "records.jsonl", "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write_latency(self, costs: CostTable) -> None:
        """Save the measured cost table used for modelled time."""
        costs.save(self.path / "latency.json")

    def latency(self) -> CostTable | None:
        """The cost table modelled time is priced with, if measured."""
        file = self.path / "latency.json"
        return CostTable.load(file) if file.exists() else None

    # --- reading ------------------------------------------------------------------------------------

    def _lines(self) -> Iterator[tuple[int, str]]:
        file = self.path / "records.jsonl"
        if not file.exists():
            return
        with open(file, encoding="utf-8") as handle:
            yield from enumerate(handle, start=1)

    def records(self) -> Iterator[dict]:
        """Valid records in file order; bad ones are reported (warning + ``self.report``) and skipped."""
        self.report = StoreReport()
        seen: set[str] = set()
        for number, line in self._lines():
            problem = None
            try:
                record = json.loads(line)
                if record.get("checksum") != record_checksum(record):
                    problem = "checksum mismatch"
            except json.JSONDecodeError:
                problem = "unreadable (torn or edited) line"
            if problem is None and record["prompt_id"] in seen:
                continue  # a duplicate can only come from a concurrent writer; keep the first
            if problem is not None:
                message = f"{self.path / 'records.jsonl'} line {number}: {problem}; record skipped"
                self.report.corrupted.append(message)
                warnings.warn(message, CorruptRecordWarning, stacklevel=2)
                continue
            seen.add(record["prompt_id"])
            yield record

    def done_ids(self) -> set[str]:
        """Prompt ids with a valid record (a rerun skips them)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptRecordWarning)
            return {r["prompt_id"] for r in self.records()}

    def features(self, record: dict) -> torch.Tensor:
        """The record's prefill logits as float32 [V]; a damaged file fails with its name."""
        if "features" not in record:
            raise ValueError(f"record {record['prompt_id']} has no features (an imported sweep?); "
                             "rerun the sweep with specpolicy to record them")
        file = self.path / record["features"]
        if hashlib.sha256(file.read_bytes()).hexdigest() != record.get("features_sha256"):
            raise ValueError(f"{file} does not match its checksum; delete the record's line and rerun the sweep")
        return load_file(str(file))["logits"].float()

    def tau_matrix(self, records: list[dict], candidates: Sequence[int] | None = None) -> np.ndarray:
        """tau of every candidate (default: the store's) for ``records``: float64 [n, C]."""
        sizes = self.candidates if candidates is None else candidates
        return np.array([[r["taus"][str(b)] for b in sizes] for r in records], dtype=np.float64)

    def feature_matrix(self, records: list[dict]) -> np.ndarray:
        """Features of ``records`` stacked: float32 [n, V]."""
        return np.stack([self.features(r).numpy() for r in records])
