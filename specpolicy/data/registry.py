"""Prompt-set registry: offline built-ins, hub-backed sets and local files, by name."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from specpolicy.data import builtin
from specpolicy.data.hub import HUB_DATASETS, load_hub_prompts
from specpolicy.data.prompts import Prompt

OFFLINE: dict[str, Callable[[], list[Prompt]]] = {
    "sharegpt": lambda: builtin.sharegpt_prompts("heldout"),
    "sharegpt-train": lambda: builtin.sharegpt_prompts("train"),
    "sharegpt-validation": lambda: builtin.sharegpt_prompts("validation"),
    "humaneval": builtin.humaneval_prompts,
    "mt-bench": builtin.mt_bench_prompts,
    "spec-bench": builtin.spec_bench_prompts,
}
HELD_APART: dict[str, Callable[[], set[str]]] = {
    "sharegpt": lambda: builtin.sharegpt_seen("heldout"),
    "sharegpt-validation": lambda: builtin.sharegpt_seen("validation"),
}
"""the inputs a named split never repeats: those of the splits a model trains on"""


def dataset_names() -> list[str]:
    """Every registered name (local files are passed as paths)."""
    return [*OFFLINE, *HUB_DATASETS]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None


def _messages(row: object, where: str) -> tuple[tuple[str, str], ...]:
    """The chat messages of one JSONL row, or a ValueError naming the line and what it needs."""
    need = "an object with a 'prompt' string or a 'messages' list of {\"role\", \"content\"} strings"
    if not isinstance(row, dict):
        raise ValueError(f"{where} is a JSON {type(row).__name__}; each line must be {need}")
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise ValueError(f"{where}: 'messages' must be a non-empty list of {{\"role\", \"content\"}} "
                             "strings")
        return tuple((m["role"], m["content"]) for m in messages)
    if not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
        why = " (its 'prompt' is not a non-empty string)" if "prompt" in row else ""
        raise ValueError(f"{where} needs {need}{why}")
    return (("user", row["prompt"]),)


def _labels(row: dict, where: str) -> tuple[str, str]:
    """(category, group) of a JSONL row: optional strings, the group defaulting to the category."""
    labels = [row.get(key, "") for key in ("category", "group")]
    if not all(isinstance(label, str) for label in labels):
        raise ValueError(f"{where}: 'category' and 'group' must be strings")
    return labels[0], labels[1]


def load_local(path: Path) -> list[Prompt]:
    """JSONL (``{"id"?, "prompt"}`` or ``{"id"?, "messages"}``, optional ``category`` / ``group``) or one
    prompt per TXT line; ids unique; a line that breaks the format fails naming it."""
    text = _read_text(path)
    if path.suffix == ".txt":
        return [Prompt.single(f"{path.stem}:{i}", line.strip()) for i, line in enumerate(text.splitlines())
                if line.strip()]
    prompts: list[Prompt] = []
    first_line: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {i} is not valid JSON: {exc.msg}") from None
        messages = _messages(row, f"{path} line {i}")
        pid = str(row.get("id", f"{path.stem}:{i - 1}"))
        if pid in first_line:
            raise ValueError(f"{path} line {i} repeats the id {pid!r} of line {first_line[pid]}; ids must "
                             "be unique")
        first_line[pid] = i
        prompts.append(Prompt(pid, messages, *_labels(row, f"{path} line {i}")))
    return prompts


def dataset_fingerprint(name: str) -> str | None:
    """Content hash of a local prompt file (16 hex digits); ``None`` for a named set (fixed content)."""
    if name in OFFLINE or name in HUB_DATASETS or not name.endswith((".jsonl", ".txt")):
        return None
    path = Path(name).expanduser()
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def load_prompts(name: str, max_samples: int | None = None, seed: int = 0) -> list[Prompt]:
    """Prompts of a named set or a local ``.jsonl``/``.txt`` file, optionally a seeded sample."""
    if name in OFFLINE:
        prompts = OFFLINE[name]()
    elif name in HUB_DATASETS:
        prompts = load_hub_prompts(name)
    elif name.endswith((".jsonl", ".txt")):
        path = Path(name).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"prompt file {path} does not exist")
        prompts = load_local(path)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}, or a .jsonl/.txt "
                         "file")
    if not prompts:
        raise ValueError(f"dataset {name!r} has no prompts")
    return builtin.sample(prompts, max_samples, seed, HELD_APART.get(name, set)())
