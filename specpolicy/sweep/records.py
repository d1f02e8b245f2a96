"""Typed, versioned sweep records (no torch). Version 2 adds ``prompt_sha256`` and keys features by id and
content (version 1 reads unchanged); ``conversation`` and ``text_key`` group the split. A record is validated
on read: a tau outside [1, B], a mis-shaped replay table or an unknown field makes the line malformed."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specpolicy.data.splits import SplitKey
from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.replay.table import ReplayTable

RECORD_VERSION = 2
READABLE_VERSIONS = (1, 2)

CycleRow = tuple[int, int, int, float, float]
"""one cycle: block size, accepted drafts, tokens committed, draft seconds, verify seconds"""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReplayEntry(_Record):
    """The replay table of a record (see :class:`~specpolicy.replay.table.ReplayTable`)."""

    candidates: tuple[int, ...]
    accepted: list[list[int]]
    sequence: list[int]
    output_length: int
    stop_token_ids: tuple[int, ...]
    budget: int
    confidences: dict[int, str] = {}
    """block size -> the drafter's confidences [output_length, B - 1], float16 (NaN: not drafted), base64"""
    entropies: dict[int, str] = {}
    """block size -> entropies (nats) of the drafter's distributions, as ``confidences`` (from 0.2)"""
    chain: bool | None = None
    """True for a chain drafter's trace (EAGLE, n-gram, MTP: a shorter draft is a prefix of a longer one):
    ``accepted`` holds one column, the drafts accepted at the longest candidate, and a block of B accepts
    min(that, B - 1); ``sequence`` may be empty (no stop token read: the recorded length ends the decode)"""
    rounds: bool | None = None
    """True for recorded rounds (a calibration bank, an engine's steps): each reachable anchor replayed on
    its own (:attr:`~specpolicy.replay.table.ReplayTable.rounds`)"""

    @model_validator(mode="after")
    def _shape(self) -> ReplayEntry:
        width = 1 if self.chain else len(self.candidates)
        if any(len(row) != width for row in self.accepted):
            raise ValueError("replay.accepted rows must hold one "
                             f"entry{'' if self.chain else ' per candidate'}")
        if len(self.accepted) != self.output_length:
            raise ValueError("replay.accepted must hold one row per output token")
        return self

    @classmethod
    def from_table(cls, table: ReplayTable) -> ReplayEntry:
        return cls(candidates=table.candidates, accepted=table.accepted.tolist(), sequence=table.sequence,
                   output_length=table.output_length, stop_token_ids=table.stop_token_ids,
                   budget=table.budget,
                   confidences=encode_rows(table.confidences), entropies=encode_rows(table.entropies))

    def table(self, prompt_length: int) -> ReplayTable:
        import numpy as np

        accepted, sequence = np.asarray(self.accepted, np.int16), self.sequence
        if self.chain:  # every block size from the longest draft: a prefix of it is the shorter draft
            accepted = np.minimum(accepted, np.asarray(self.candidates, np.int16) - 1)
        sequence = sequence or [0] * (prompt_length + self.output_length + max(self.candidates))  # no tokens
        return ReplayTable(prompt_length, self.output_length, self.candidates, accepted, sequence,
                           self.stop_token_ids, self.budget,
                           self._decode_rows(self.confidences), self._decode_rows(self.entropies),
                           bool(self.rounds))

    def _decode_rows(self, encoded: dict[int, str]) -> dict:
        """block size -> float32 [output_length, B - 1] from the stored float16 base64."""
        import numpy as np

        return {b: np.frombuffer(base64.b64decode(v),
                                 dtype="<f2").astype(np.float32).reshape(self.output_length, b - 1)
                for b, v in encoded.items()}


def encode_rows(rows: dict) -> dict[int, str]:
    """block size -> [n, B - 1] values as float16 little-endian bytes in base64 (what the store keeps)."""
    import numpy as np

    return {b: base64.b64encode(np.ascontiguousarray(v, dtype="<f2").tobytes()).decode("ascii")
            for b, v in rows.items()}


class ReferenceRun(_Record):
    """The live decode a replay table was built from (its timings are real)."""

    block_size: int
    cycles: list[CycleRow]
    prefill_seconds: float
    decode_seconds: float


class LiveRun(_Record):
    """One block size decoded live (``--mode live``)."""

    cycles: list[CycleRow]
    decode_seconds: float
    tokens: int
    tau: float


class SweepRecord(_Record):
    """One prompt of a sweep. ``taus``: tau of every candidate as a fixed block size."""

    version: int = 1
    prompt_id: str = Field(min_length=1)
    index: int = Field(ge=0)
    prompt_length: int = Field(0, ge=0)
    prompt_sha256: str | None = None
    training_block_size: int = TRAINING_BLOCK_SIZE
    taus: dict[int, float]
    output_length: int | None = None
    stop_reason: str | None = None
    replay: ReplayEntry | None = None
    reference: ReferenceRun | None = None
    live: dict[int, LiveRun] | None = None
    features: str | None = None
    features_sha256: str | None = None
    category: str | None = None
    """the prompt's category and task group, for per-category reports (``compare --by``)"""
    group: str | None = None
    conversation: str | None = None
    """the prompt's conversation and input (:mod:`specpolicy.data.splits`); before 0.2 the id stands in"""
    text_key: str | None = None

    @model_validator(mode="after")
    def _valid(self) -> SweepRecord:
        if self.version not in READABLE_VERSIONS:
            raise ValueError(f"record version {self.version} is not readable by this specpolicy "
                             f"(reads {READABLE_VERSIONS}); upgrade specpolicy")
        bad = {b: t for b, t in self.taus.items() if b < 1 or not (t == 0 or 1 <= t <= b)}
        if bad:
            raise ValueError(f"taus out of range (1 <= tau <= B, or 0 for no cycle): {bad}")
        return self

    @property
    def split_key(self) -> SplitKey:
        """What the store's train/validation split groups this record by."""
        return SplitKey(self.prompt_id, self.conversation or self.prompt_id,
                        self.text_key or self.prompt_sha256 or self.prompt_id)

    def tau(self, block_size: int) -> float:
        """tau of ``block_size``; a ValueError naming what the sweep holds when it was not swept."""
        # live stores before 2026-12
        if block_size not in self.taus and self.live and block_size in self.live:
            return self.live[block_size].tau
        if block_size not in self.taus:
            raise ValueError(f"the sweep has no tau for block size {block_size}; it holds "
                             f"{sorted(self.taus)} (sweep that size or pass --candidates from these)")
        return self.taus[block_size]

    def tau_row(self, candidates: Sequence[int]) -> list[float]:
        return [self.tau(b) for b in candidates]

    def table(self) -> ReplayTable:
        """The replay table; a ValueError when the record has none (a live or imported sweep)."""
        if self.replay is None:
            raise ValueError(f"record {self.prompt_id} has no replay table; per-cycle policies and modelled "
                             "time need a replay sweep (specpolicy sweep --mode replay)")
        return self.replay.table(self.prompt_length)

    def to_json(self) -> dict:
        """The record as stored (JSON types, no ``None`` fields)."""
        return self.model_dump(mode="json", exclude_none=True)


def checksum(body: dict) -> str:
    """sha256 of a record's canonical JSON, without its ``checksum`` field."""
    body = {k: v for k, v in body.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prompt_digest(prompt_ids: Sequence[int]) -> str:
    """Content hash of an encoded prompt (the ids a sweep decoded)."""
    return hashlib.sha256(json.dumps(list(map(int, prompt_ids))).encode()).hexdigest()[:16]
