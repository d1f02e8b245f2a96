"""The argument checks every entry point shares (library functions, policies, sessions and the command line):
one check per kind of argument, each a ValueError that names the argument and what it takes. No torch here."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from specpolicy.defaults import DRAFTER_KINDS, MAX_BLOCK_SIZE, MAX_TEMPERATURE


def is_integer(value: object) -> bool:
    """Whether ``value`` is a whole number of any integer type (numpy's included), a bool not being one: the
    one test every check of a count, size or index below makes."""
    return not isinstance(value, bool) and hasattr(value, "__index__")


def check_block_size(block_size: object) -> int:
    """``block_size`` as an int in 1..MAX_BLOCK_SIZE, or a ValueError naming it: the one check every entry
    point (decoder, sessions, plans, transformers' loop, sweeps, the CLI) runs."""
    if not is_integer(block_size) or not 1 <= int(block_size) <= MAX_BLOCK_SIZE:
        raise ValueError(f"block size must be an integer in 1..{MAX_BLOCK_SIZE} (1 = autoregressive), "
                         f"got {block_size!r}")
    return int(block_size)


def check_no_argument(arg: str | None, what: str) -> None:
    """Refuse a policy's argument where its family reads none (``what`` names the family)."""
    if arg is not None:
        raise ValueError(f"{what} takes no argument, got {arg!r}; drop ':{arg}'")


def check_candidate_set(candidates: Iterable[object], what: str = "candidates") -> tuple[int, ...]:
    """``candidates`` as sorted block sizes, each through :func:`check_block_size`, or a ValueError naming
    ``what``: the one check of a candidate set (policies, sweeps, replay tables, the CLI)."""
    if isinstance(candidates, str | bytes):  # read letter by letter it would name '4' and ','
        raise ValueError(f"{what} must be a list of block sizes such as [4, 8, 16], got {candidates!r}")
    values = list(candidates)
    try:
        sizes = [check_block_size(b) for b in values]
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if not sizes or len(set(sizes)) != len(sizes):
        raise ValueError(f"{what} must name distinct block sizes (none may repeat), got {values}")
    return tuple(sorted(sizes))


def check_count(value: object, what: str, least: int = 1) -> int:
    """``value`` as an int >= ``least`` (a bool, a float or a string refused), or a ValueError naming
    ``what``: the one check of a single count."""
    if not is_integer(value) or value < least:
        raise ValueError(f"{what} must be an integer >= {least}, got {value!r}")
    return int(value)


def check_counts(values: object, what: str) -> tuple[int, ...]:
    """``values`` as sorted distinct integers >= 1 (concurrencies, batch sizes), or a ValueError naming
    ``what``: the one check of a set of counts (the library and the command line)."""
    items = list(values) if isinstance(values, list | tuple | range) else None
    if not items or any(not is_integer(v) or v < 1 for v in items) or len(set(items)) != len(items):
        raise ValueError(f"{what} must be distinct counts >= 1, such as [1, 4, 16], got {values!r}")
    return tuple(sorted(int(v) for v in items))


def check_type(value: object, kind: type, what: str, example: str) -> None:
    """A ValueError naming ``what`` unless ``value`` is a ``kind`` (``example``: how to make one)."""
    if not isinstance(value, kind):
        raise ValueError(f"{what} must be a {kind.__name__} ({example}), got {value!r}")


def check_drafter_kind(kind: object, what: str) -> str:
    """``kind`` when it names how a drafter drafts (:data:`~specpolicy.defaults.DRAFTER_KINDS`, or empty:
    a block drafter); else a ValueError naming ``what`` and the kinds."""
    if kind != "" and kind not in DRAFTER_KINDS:
        raise ValueError(f"{what}'s drafter must be one of {', '.join(DRAFTER_KINDS)} (how it drafts: "
                         f"{'; '.join(f'{k}: {v}' for k, v in DRAFTER_KINDS.items())}), got {kind!r}")
    return kind


def check_real(value: object, what: str, low: float, high: float = math.inf, *, strict_low: bool = False,
               strict_high: bool = False) -> float:
    """``value`` as a finite float between ``low`` and ``high`` (each excluded where strict; a bool or a
    string refused), or a ValueError naming ``what``: the one check of a real-valued setting."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not (number and (low < value if strict_low else low <= value)
            and (value < high if strict_high else value <= high)):
        bound = (f"{'>' if strict_low else '>='} {low:g}" if math.isinf(high) else
                 f"in {'(' if strict_low else '['}{low:g}, {high:g}{')' if strict_high else ']'}")
        raise ValueError(f"{what} must be a finite number {bound}, got {value!r}")
    return float(value)


def check_verify_length(verify_length: object, block_size: int, cap: bool = False) -> int:
    """``verify_length`` as an int in 1..``block_size`` (``None``: the whole block; with ``cap`` a longer
    length is cut to the block), or a ValueError naming both: the one check of a verify length L."""
    if verify_length is None:
        return block_size
    longest = MAX_BLOCK_SIZE if cap else block_size
    if not is_integer(verify_length) or not 1 <= int(verify_length) <= longest:
        raise ValueError(f"verify length must be an integer in 1..{block_size} (the block size), got "
                         f"{verify_length!r}")
    return min(int(verify_length), block_size)


def check_temperature(temperature: float, name: str = "temperature") -> float:
    """``temperature`` in 0..:data:`~specpolicy.defaults.MAX_TEMPERATURE` (0: greedy), else a ValueError."""
    return check_real(temperature, name, 0, MAX_TEMPERATURE)


def check_engine(name: str | None, verb: str = "drives", server: str | None = None) -> None:
    """The one check of an ``--engine`` name (``None``: no engine; ``server`` only with one): llama.cpp's."""
    if name not in (None, "llamacpp"):
        raise ValueError(f"--engine {name} is not an engine specpolicy {verb}; use --engine llamacpp")
    if server is not None and name is None:
        raise ValueError("--server is the llama-server --engine runs: add --engine llamacpp or drop it")
