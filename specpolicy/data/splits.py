"""The one split rule: prompts sharing a conversation or a normalised text are never on two sides."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from specpolicy.defaults import VALIDATION_SHARE

SIDES = ("train", "validation")
"""the two sides of a store (ShareGPT's own three splits are :data:`specpolicy.data.sharegpt.SPLITS`)"""


def normalise_text(text: str) -> str:
    """Unicode-normalised (NFKC), case-folded, whitespace collapsed, end punctuation stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).strip(" .!?")


def text_key(messages: Iterable[tuple[str, str]]) -> str:
    """16 hex digits naming a prompt's normalised user turns (what :func:`distinct` compares)."""
    users = "\n".join(normalise_text(text) for role, text in messages if role == "user")
    return hashlib.sha256(users.encode("utf-8")).hexdigest()[:16]


class SplitKey(NamedTuple):
    """What a prompt is split by: its id, its conversation and its input (:func:`text_key`)."""

    prompt_id: str
    conversation: str
    text: str


def distinct(prompts: Iterable, seen: Iterable[str] = ()) -> list:
    """``prompts`` in order, less those repeating an earlier input or one in ``seen`` (another split's)."""
    taken, kept = set(seen), []
    for prompt in prompts:
        key = text_key(prompt.messages)
        if key not in taken:
            taken.add(key)
            kept.append(prompt)
    return kept


def _bucket(name: str, seed: int) -> float:
    """A stable value in [0, 1) for ``name``."""
    return int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest(), 16) % 1000 / 1000


def validation_ids(keys: Sequence[SplitKey], share: float = VALIDATION_SHARE, seed: int = 0) -> set[str]:
    """The validation side's prompt ids: groups linked by conversation or input (union-find) go to validation
    when a hash of their smallest conversation key falls below ``share``."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for key in keys:
        a, b = root("c:" + key.conversation), root("t:" + key.text)
        if a != b:
            parent[max(a, b)] = min(a, b)  # conversations ("c:") sort first: a group's root is a conversation
    return {key.prompt_id for key in keys if _bucket(root("c:" + key.conversation)[2:], seed) < share}
