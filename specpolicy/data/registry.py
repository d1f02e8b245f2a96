"""Prompt-set registry: offline built-ins, hub-backed sets and local files, by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from specpolicy.data.builtin import humaneval_prompts, sample, sharegpt_prompts
from specpolicy.data.hub import HUB_DATASETS, load_hub_prompts
from specpolicy.data.prompts import Prompt

OFFLINE: dict[str, Callable[[], list[Prompt]]] = {
    "sharegpt": lambda: sharegpt_prompts("heldout"),
    "sharegpt-train": lambda: sharegpt_prompts("train"),
    "sharegpt-validation": lambda: sharegpt_prompts("validation"),
    "humaneval": humaneval_prompts,
}


def dataset_names() -> list[str]:
    """Every registered name (local files are passed as paths)."""
    return [*OFFLINE, *HUB_DATASETS]


def load_local(path: Path) -> list[Prompt]:
    """JSONL (``{"id"?, "prompt"}`` or ``{"id"?, "messages": [{"role", "content"}]}``) or one prompt per TXT line."""
    prompts: list[Prompt] = []
    if path.suffix == ".txt":
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if line.strip():
                prompts.append(Prompt.single(f"{path.stem}:{i}", line.strip()))
        return prompts
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {i} is not valid JSON: {exc.msg}") from None
        pid = str(row.get("id", f"{path.stem}:{i - 1}"))
        if "messages" in row:
            messages = tuple((m["role"], m["content"]) for m in row["messages"])
        elif "prompt" in row:
            messages = (("user", str(row["prompt"])),)
        else:
            raise ValueError(f"{path} line {i} needs a 'prompt' string or a 'messages' list")
        prompts.append(Prompt(pid, messages))
    return prompts


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
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}, or a .jsonl/.txt file")
    if not prompts:
        raise ValueError(f"dataset {name!r} has no prompts")
    return sample(prompts, max_samples, seed)
