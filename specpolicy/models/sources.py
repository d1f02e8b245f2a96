"""Where a model is and what it is, without loading it (no torch): zoo names, folders and hub ids."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

ZOO_NAMES = ("tiny", "twin")
"""the built-in pair, and its cost twin (the same function in a larger network: ``specpolicy zoo twin``)"""


def twin_dir() -> Path:
    """Where ``specpolicy zoo twin`` builds the cost twin (in specpolicy's cache)."""
    from specpolicy.defaults import cache_dir

    return cache_dir() / "twin"


def zoo_path(name: str, kind: str) -> Path:
    """Folder of a built-in zoo model (``kind`` is ``target`` or ``drafter``)."""
    from specpolicy.zoo import ZOO_DIR, finish_publish

    if name == "twin":
        folder = twin_dir() / kind
        if not (folder / "config.json").exists():
            raise FileNotFoundError(f"the cost twin is not built ({folder} is missing); build it once with "
                                    "`specpolicy zoo twin` (about a minute, no downloads)")
        return folder
    finish_publish(ZOO_DIR)  # an interrupted `python -m zoo_build publish` completes before the zoo is read
    folder = ZOO_DIR / kind
    if not (folder / "config.json").exists():
        raise FileNotFoundError(
            f"the built-in zoo {kind} {name!r} is missing from {folder}; reinstall specpolicy, or from a "
            "checkout rebuild it with `python -m zoo_build train` and `python -m zoo_build publish`"
        )
    return folder


def resolve_source(name: str, kind: str) -> str:
    """A zoo name, an existing local folder, or (for online users) a hub id, as a string."""
    if name in ZOO_NAMES:
        return str(zoo_path(name, kind))
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            what = "a file" if path.is_file() else "a folder without config.json"
            raise FileNotFoundError(f"{kind} {name!r} is {what}; pass a model folder (config.json and "
                                    f"safetensors weights), a zoo name ({', '.join(ZOO_NAMES)}) or a hub id "
                                    "owner/name")
        return str(path)
    if name.count("/") != 1 or name.startswith((".", "/")):
        raise FileNotFoundError(f"{kind} {name!r} is neither a zoo name ({', '.join(ZOO_NAMES)}), a local "
                                "folder, nor a hub id of the form owner/name")
    return name


def target_vocab_size(name: str) -> int | None:
    """The target's vocabulary from its config alone, before any weights load (``None``: not readable so)."""
    try:
        source = resolve_source(name, "target")
        if Path(source, "config.json").is_file():
            config = json.loads(Path(source, "config.json").read_text(encoding="utf-8"))
            return config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(source)
    except Exception:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "vocab_size", None)


def weights_fingerprint(name: str, kind: str) -> str | None:
    """sha256 (16 hex digits) of a zoo or local model's safetensors files (``None`` for a hub id), recorded
    by sweeps and caches; hashed once per process per set of files (paths, sizes, mtimes)."""
    folder = Path(resolve_source(name, kind))
    if not folder.exists():
        return None  # hub id: its revision is recorded once loaded
    stats = [(path, path.stat()) for path in sorted(folder.glob("*.safetensors"))]
    files = tuple((str(path), stat.st_size, stat.st_mtime_ns) for path, stat in stats)
    return _hash_files(files)


@functools.lru_cache(maxsize=64)
def _hash_files(files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path, _, _ in files:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]
