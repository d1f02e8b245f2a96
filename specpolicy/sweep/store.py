"""The sweep store: a folder of typed per-prompt records, append-only, resumable, checksummed and locked
(layout: docs/concepts.md). A record is committed by appending its line after its features file is in place,
so a kill loses no finished prompt and a rerun duplicates none; a torn or invalid line is skipped."""

from __future__ import annotations

import collections
import fcntl
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError
from safetensors.numpy import load_file, save_file

from specpolicy.costs import CostTable
from specpolicy.data.splits import SIDES, validation_ids
from specpolicy.defaults import SWEEPS_DIR
from specpolicy.features import to_numpy
from specpolicy.files import atomic_path, shipped, write_text
from specpolicy.sweep.records import SweepRecord, checksum
from specpolicy.sweep.resume import check_resumable

SCHEMA = "specpolicy.sweep/1"


class CorruptRecordWarning(UserWarning):
    """A record in a sweep store failed its checksum or could not be parsed; it was skipped."""


class StoreLockedError(RuntimeError):
    """Another process is writing to the store."""


@dataclass
class StoreReport:
    """What reading a store found besides good records."""

    corrupted: list[str] = field(default_factory=list)


def _last_byte(file: Path) -> bytes:
    with open(file, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


class SweepStore:
    """A sweep store folder: create or resume with :meth:`open` (locks it), read with :meth:`records`;
    ``split`` reads one side (``train`` or ``validation``, :func:`~specpolicy.data.splits.validation_ids`)."""

    def __init__(self, path: Path, meta: dict, split: str | None = None) -> None:
        if split is not None and split not in SIDES:
            raise ValueError(f"unknown split {split!r}; a store splits into {', '.join(SIDES)} (or pass no "
                             "split)")
        self.path = Path(path)
        self.meta = meta
        self.split = split
        self.report = StoreReport()
        self._lock = None

    # --- creation and resumption --------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, meta: dict, wait: Callable[[Path], None] | None = None) -> SweepStore:
        """Create ``path`` with ``meta`` or resume it (settings matching), holding its write lock; another
        writer makes it fail (:class:`StoreLockedError`), or with ``wait`` say so and block."""
        path = Path(path)
        meta = {"schema": SCHEMA, **meta}
        check_resumable(path, meta)
        path.mkdir(parents=True, exist_ok=True)
        store = cls(path, meta)
        store._acquire(wait)
        meta_file = path / "meta.json"
        if meta_file.exists():
            store.meta = json.loads(meta_file.read_text(encoding="utf-8"))
            return store
        (path / "features").mkdir(exist_ok=True)
        write_text(meta_file, json.dumps(meta, indent=2, sort_keys=True))
        return store

    def _acquire(self, wait: Callable[[Path], None] | None = None) -> None:
        handle = open(self.path / ".lock", "a+")  # noqa: SIM115 (held for the store's lifetime)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait is not None:
                wait(self.path)
                fcntl.flock(handle, fcntl.LOCK_EX)
                self._lock = handle
                return
            handle.close()
            raise StoreLockedError(f"another process is writing to {self.path}; wait for it to "
                                   "finish or pass another --out folder") from None
        self._lock = handle

    @classmethod
    def fill(cls, path: str | Path, meta: dict, records: Iterable[SweepRecord]) -> SweepStore:
        """The store of an import at ``path``: every record built (the importer's checks run) and ids checked
        unique before anything is written, then written whole into a temporary sibling renamed into place, so
        a failed import leaves nothing. A store of the same import holding every record is kept; other
        settings are refused."""
        records, path = list(records), Path(path)
        ids = collections.Counter(r.prompt_id for r in records)
        repeated = sorted(i for i, count in ids.items() if count > 1)
        if repeated:
            raise ValueError(f"{meta.get('source', path)}: more than one decode is named "
                             f"{', '.join(repeated[:3])}{' ...' if len(repeated) > 3 else ''} (repeated "
                             "ids, or ids another turn's name takes); pass a file holding one record per "
                             "id, one run per file")
        check_resumable(path, {"schema": SCHEMA, **meta})
        existing = cls.load(path) if (path / "meta.json").exists() else None
        if existing is not None and set(ids) <= existing.done_ids():
            return existing
        with atomic_path(path, "meta.json") as tmp, cls.open(tmp, meta) as store:
            for record in records:
                store.append(record)
        return cls.load(path)

    def close(self) -> None:
        """Release the write lock (also released when the process ends)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> SweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def load(cls, path: str | Path, split: str | None = None) -> SweepStore:
        """Open an existing store for reading (``split``: only its ``train`` or ``validation`` prompts); a
        shipped sweep opens by its name or its checkout path from any folder."""
        path = shipped(path, SWEEPS_DIR, found=lambda folder: (folder / "meta.json").is_file())
        meta_file = path / "meta.json"
        if not meta_file.exists():
            raise FileNotFoundError(f"{path} is not a sweep store (no meta.json); run `specpolicy sweep "
                                    f"--out {path}`")
        try:
            meta = json.loads(meta_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{meta_file} is damaged ({error}); it holds the sweep's settings, "
                             "so restore it from a copy, or sweep into a new --out folder") from None
        if not isinstance(meta, dict) or not str(meta.get("schema", "")).startswith("specpolicy.sweep/"):
            schema = meta.get("schema") if isinstance(meta, dict) else meta
            raise ValueError(f"{meta_file} has unknown schema {schema!r}; it is not a specpolicy sweep store")
        return cls(path, meta, split)

    @property
    def candidates(self) -> tuple[int, ...]:
        return tuple(int(b) for b in self.meta["candidates"])

    # --- writing ------------------------------------------------------------------------------------

    def append(self, record: SweepRecord, features: Any = None) -> None:
        """Commit one prompt's record (and its features [V], kept as float16); the line append commits."""
        if features is not None:
            key = hashlib.sha256(f"{record.prompt_id}\0{record.prompt_sha256}".encode()).hexdigest()[:24]
            name = f"features/{key}.safetensors"
            with atomic_path(self.path / name) as tmp:
                save_file({"logits": np.ascontiguousarray(to_numpy(features), dtype=np.float16)}, str(tmp))
            digest = hashlib.sha256((self.path / name).read_bytes()).hexdigest()
            record = record.model_copy(update={"features": name, "features_sha256": digest})
        body = record.to_json()
        line = json.dumps({**body, "checksum": checksum(body)}, separators=(",", ":")) + "\n"
        file = self.path / "records.jsonl"
        with open(file, "ab") as handle:
            if handle.tell() and _last_byte(file) != b"\n":
                handle.write(b"\n")  # close a torn last line: it stays one bad line, never eats this record
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    def write_latency(self, costs: CostTable) -> None:
        """Save the measured cost table used for modelled time."""
        costs.save(self.path / "latency.json")

    def latency(self) -> CostTable | None:
        """The cost table modelled time is priced with, if measured."""
        file = self.path / "latency.json"
        try:
            return CostTable.load(file) if file.exists() else None
        except ValueError as error:
            raise ValueError(f"{error}; or resume the sweep (the same `specpolicy sweep` "
                             "command), which measures it again, or price with --costs FILE") from None

    # --- reading ------------------------------------------------------------------------------------

    def _parse(self, raw: bytes) -> tuple[SweepRecord | None, str | None]:
        """(record, None), or (None, why the line is bad)."""
        try:
            body = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return None, "not UTF-8"
        except json.JSONDecodeError:
            return None, "unreadable (torn or edited) line"
        if not isinstance(body, dict):
            return None, f"a JSON {type(body).__name__}, not a record object"
        if body.get("checksum") != checksum(body):
            return None, "checksum mismatch"
        try:
            record = SweepRecord.model_validate({k: v for k, v in body.items() if k != "checksum"})
        except ValidationError as error:
            first = error.errors()[0]
            return None, f"invalid record ({'.'.join(map(str, first['loc']))}: {first['msg']})"
        features = self.path / (record.features or "")
        if record.features is not None and not (features.is_file() and hashlib.sha256(
                features.read_bytes()).hexdigest() == record.features_sha256):
            return None, (f"its features file {record.features} is missing or damaged (a resume sweeps the "
                          "prompt again)")
        return record, None

    def records(self) -> Iterator[SweepRecord]:
        """Valid records in file order (of the store's ``split`` side, if set); bad ones are reported (warning
        + ``self.report``) and skipped."""
        if self.split is None:
            yield from self._all_records()
            return
        records = list(self._all_records())
        validation = validation_ids([r.split_key for r in records])
        yield from (r for r in records if (r.prompt_id in validation) == (self.split == "validation"))

    def _all_records(self) -> Iterator[SweepRecord]:
        self.report = StoreReport()
        file = self.path / "records.jsonl"
        if not file.exists():
            return
        seen: set[str] = set()
        with open(file, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                record, problem = self._parse(raw)
                if problem is not None:
                    message = f"{file} line {number}: {problem}; record skipped"
                    self.report.corrupted.append(message)
                    warnings.warn(message, CorruptRecordWarning, stacklevel=2)
                    continue
                if record.prompt_id in seen:
                    continue  # a duplicate can only come from an interrupted append race; keep the first
                seen.add(record.prompt_id)
                yield record

    def done_ids(self) -> set[str]:
        """Prompt ids with a valid record (a rerun skips them)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptRecordWarning)
            return {r.prompt_id for r in self.records()}

    def features(self, record: SweepRecord) -> np.ndarray:
        """The record's prefill logits as float32 [V]; a damaged file fails with its name."""
        if record.features is None:
            raise ValueError(f"record {record.prompt_id} has no features (an imported sweep?); "
                             "rerun the sweep with specpolicy to record them")
        file = self.path / record.features
        if not file.exists() or hashlib.sha256(file.read_bytes()).hexdigest() != record.features_sha256:
            raise ValueError(f"{file} is missing or does not match its checksum (record {record.prompt_id}); "
                             "resume the sweep (the same command) to sweep that prompt again")
        return load_file(str(file))["logits"].astype(np.float32)

    def feature_width(self) -> int | None:
        """The width of the recorded prefill logits (the target's vocabulary); ``None`` without features.
        Remembered once known (every record of a store has the same width)."""
        if getattr(self, "_feature_width", None) is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CorruptRecordWarning)
                record = next((r for r in self.records() if r.features), None)
            self._feature_width = None if record is None else int(self.features(record).shape[-1])
        return self._feature_width

    def tau_matrix(self, records: Sequence[SweepRecord],
                   candidates: Sequence[int] | None = None) -> np.ndarray:
        """tau of every candidate (default: the store's) for ``records``: float64 [n, C]."""
        sizes = self.candidates if candidates is None else candidates
        return np.array([r.tau_row(sizes) for r in records], np.float64).reshape(len(records), len(sizes))

    def feature_matrix(self, records: Sequence[SweepRecord]) -> np.ndarray:
        """Features of ``records`` stacked: float32 [n, V]; [n, 0] for a store that records none (imported
        traces: what per-cycle policies learn from is the replay, not the prefill)."""
        return (np.zeros((len(records), 0), np.float32) if all(r.features is None for r in records)
                else np.stack([self.features(r) for r in records]))
