"""Cost tables: seconds of one cycle per block size on one machine, and modelled time from them (no torch)."""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar, TypeVar

import numpy as np

from specpolicy.arguments import check_drafter_kind
from specpolicy.defaults import CONTEXT_BUCKETS, MAX_LATENCY_SPREAD, MEASURED_DIR
from specpolicy.files import shipped, write_text

Table = TypeVar("Table", bound="TableFile")


class TableFile:
    """Load, save and flag, one way for both cost-table classes: a missing file is a FileNotFoundError, an
    unreadable one a ValueError naming it, a flagged table loads and warns wherever it prices."""

    WHAT: ClassVar[str] = "cost table"
    MEASURE: ClassVar[str] = "bench latency"
    OPTION: ClassVar[str] = "--costs"
    SHIPPED: ClassVar[str] = "cast-h100-sxm-llama-3.1-8b-context-1024"
    """a table of this class shipped in ``specpolicy/zoo/measured``, named by the missing-file message"""

    def save(self, path: str | Path) -> None:
        write_text(path, json.dumps(self.to_json(), indent=2))

    @classmethod
    def load(cls: type[Table], path: str | Path) -> Table:
        """Read ``path``, or the table of that name in ``specpolicy/zoo/measured`` (from any folder)."""
        file = shipped(path, MEASURED_DIR, ".json", Path.is_file)
        remeasure = f"remeasure it with `specpolicy {cls.MEASURE} --out FILE`"
        if not file.is_file():
            raise FileNotFoundError(f"{cls.WHAT} {file} does not exist; measure one with "
                                    f"`specpolicy {cls.MEASURE} --out {file}`, or name a table shipped in "
                                    f"{MEASURED_DIR} (such as {cls.SHIPPED})")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}")
            return cls.from_json(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, AttributeError,
                KeyError) as exc:
            raise ValueError(f"{file} is not a {cls.WHAT} ({exc}); {remeasure}") from None
        except ValueError as exc:  # a readable table with impossible seconds
            raise ValueError(f"{file}: {exc}") from None

    def flag_warnings(self, where: object) -> list[str]:
        """A line per problem of ``check()``, naming ``where`` the table came from: what every caller that
        prices with a table says of a flagged one."""
        return [f"the {self.WHAT} {where} is flagged ({problem}); modelled speeds and cost-aware choices can "
                f"be off: remeasure on a quiet machine (`specpolicy {self.MEASURE} --out FILE`, then "
                f"{self.OPTION} FILE)"
                for problem in self.check()]


@dataclass(frozen=True)
class CostTable(TableFile):
    """Seconds of one cycle per block size, and of one plain autoregressive step: ``draft_seconds[B]`` (0 at
    B = 1), ``verify_seconds[B]`` (with hidden states), ``ar_seconds`` (without: every speedup's baseline),
    ``spread[B]`` (relative IQR of repeats), ``source`` (provenance of a table not measured here),
    ``drafter``: how its drafter drafts (:data:`~specpolicy.defaults.DRAFTER_KINDS`; empty: block)."""

    draft_seconds: Mapping[int, float]
    verify_seconds: Mapping[int, float]
    ar_seconds: float
    threads: int | None = None
    dtype: str = ""
    device: str = ""
    machine: str = ""
    context_length: int = 0
    repeats: int = 0
    spread: Mapping[int, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    source: str = ""
    drafter: str = ""

    def __post_init__(self) -> None:
        """Every table, however made (measured, loaded, per concurrency), holds positive finite
        seconds (a drafter pass may be 0, as at B = 1): a zero or NaN made every policy read 0.00x."""
        def positive(s: float, zero_ok: bool = False) -> bool:
            return math.isfinite(s) and (s >= 0 if zero_ok else s > 0)

        bad = [] if positive(self.ar_seconds) else [f"ar_seconds = {self.ar_seconds}"]
        bad += [f"verify_seconds[{b}] = {s}" for b, s in self.verify_seconds.items() if not positive(s)]
        bad += [f"draft_seconds[{b}] = {s}" for b, s in self.draft_seconds.items()
                if not positive(s, zero_ok=True)]
        if bad:
            raise ValueError(f"a cost table needs positive finite seconds, got {', '.join(bad[:4])}; "
                             "remeasure it with `specpolicy bench latency --out FILE`")
        check_drafter_kind(self.drafter, "a cost table")

    @property
    def block_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(self.verify_seconds))

    @cached_property
    def _prices(self) -> dict:
        """The one cache of cycle prices, filled once per table (replay asks millions of times): seconds per
        block size, and as arrays per candidate set (:meth:`fastest`)."""
        return {b: self.draft_seconds.get(b, 0.0) + v for b, v in self.verify_seconds.items()}

    def cycle_seconds(self, block_size: int) -> float:
        """Draft + verify seconds of one cycle at ``block_size``."""
        seconds = self._prices.get(block_size)
        if seconds is None:
            self._require([int(block_size)])
            seconds = self._prices[int(block_size)]
        return seconds

    def fixed_cycle_seconds(self, block_size: int) -> float:
        """Seconds of a cycle of a decode at ``block_size`` every cycle: B = 1 is plain decoding
        (:attr:`ar_seconds`, no drafter), any other B :meth:`cycle_seconds` (a per-cycle rule's plain steps
        between drafts cost :meth:`cycle_seconds` (1): a drafter's engine may spend more on them)."""
        return self.ar_seconds if block_size == 1 else self.cycle_seconds(block_size)

    def _require(self, block_sizes: Iterable[int]) -> None:
        missing = [str(b) for b in block_sizes if b not in self.verify_seconds]
        if missing:
            raise ValueError(f"the cost table has no entry for block size {', '.join(missing)} (it has "
                             f"{list(self.block_sizes)}); remeasure with `specpolicy bench latency "
                             "--candidates ...` including them")

    def seconds(self, block_sizes: Iterable[int]) -> float:
        """Modelled seconds of cycles with these block sizes."""
        return sum(self.cycle_seconds(b) for b in block_sizes)

    def verify_cost(self, length: int) -> float:
        """Seconds of one target pass over ``length`` tokens: measured, or linearly interpolated between
        the nearest measured lengths (a ValueError outside the measured range)."""
        sizes = self.block_sizes
        if length in self.verify_seconds:
            return self.verify_seconds[length]
        if not sizes[0] < length < sizes[-1]:
            raise ValueError(f"the cost table measured verify lengths {sizes[0]}..{sizes[-1]}, not {length}; "
                             f"remeasure with `specpolicy bench latency --candidates ...` including {length}")
        above = next(b for b in sizes if b > length)
        below = max(b for b in sizes if b < length)
        share = (length - below) / (above - below)
        return self.verify_seconds[below] + share * (self.verify_seconds[above] - self.verify_seconds[below])

    def split_cycle_seconds(self, block_size: int, verify_length: int) -> float:
        """Seconds of a cycle that drafts ``block_size`` and verifies ``verify_length`` of it (L <= B)."""
        if verify_length >= block_size:
            return self.cycle_seconds(block_size)
        self.cycle_seconds(block_size)  # the drafter's pass must be measured
        return self.draft_seconds.get(int(block_size), 0.0) + self.verify_cost(int(verify_length))

    def cycles_seconds(self, cycles: Iterable) -> float:
        """Modelled seconds of :class:`~specpolicy.cycles.CycleRecord` s (each priced at its B and L)."""
        return sum(self.split_cycle_seconds(c.block_size, c.verify_length) for c in cycles)

    def fastest(self, cycles_per_token: np.ndarray, candidates: Sequence[int], per_cycle: bool = False
                ) -> np.ndarray:
        """Per prompt, the candidate index with the fewest expected seconds per token: ``cycles_per_token``
        float [n, C] x a cycle's seconds (a decode's at that B, :meth:`fixed_cycle_seconds`; ``per_cycle``:
        one cycle's among others, :meth:`cycle_seconds`), :func:`cheapest`. Returns int64 [n]."""
        return cheapest(np.atleast_2d(cycles_per_token) * self._price_row(candidates, per_cycle))

    def _price_row(self, candidates: Sequence[int], per_cycle: bool) -> np.ndarray:
        """Seconds of a cycle at each of ``candidates`` [C], as :meth:`fastest` prices them (cached)."""
        key = (tuple(candidates), per_cycle)
        if key not in self._prices:
            self._require(candidates)
            price = self.cycle_seconds if per_cycle else self.fixed_cycle_seconds
            self._prices[key] = np.array([price(b) for b in candidates])
        return self._prices[key]

    def in_ar_steps(self, block_size: int) -> float:
        """Cost of one cycle at ``block_size`` in plain AR steps."""
        return self.cycle_seconds(block_size) / self.ar_seconds

    def check(self, max_spread: float = MAX_LATENCY_SPREAD) -> list[str]:
        """Problems that make the table untrustworthy: noisy repeats, cost falling with B, a slow AR step."""
        problems = []
        noisy = {b: s for b, s in self.spread.items() if s > max_spread}
        if noisy:
            worst = max(noisy, key=noisy.get)
            problems.append(f"noisy: {len(noisy)} block sizes vary by more than {max_spread:.0%} between "
                            f"repeats (worst B = {worst}: {noisy[worst]:.0%})")
        sizes = self.block_sizes
        for small, large in itertools.pairwise(sizes):
            tolerance = 1 + max(self.spread.get(small, 0.0), self.spread.get(large, 0.0), 0.05)
            if self.cycle_seconds(large) * tolerance < self.cycle_seconds(small):
                problems.append(f"not monotone: a cycle at B = {large} "
                                f"({1e3 * self.cycle_seconds(large):.2f} ms) costs less than at B = {small} "
                                f"({1e3 * self.cycle_seconds(small):.2f} ms)")
        if 1 in self.verify_seconds and self.ar_seconds > 1.25 * self.verify_seconds[1]:
            problems.append(f"the plain AR step ({1e3 * self.ar_seconds:.2f} ms) costs more than a B = 1 "
                            f"cycle with hidden states ({1e3 * self.verify_seconds[1]:.2f} ms)")
        return problems

    # --- JSON ------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        data = asdict(self)
        for key in ("draft_seconds", "verify_seconds", "spread"):
            data[key] = {str(b): s for b, s in sorted(getattr(self, key).items())}
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> CostTable:
        """Read a table (before ``ar_seconds``: the B = 1 verify pass); a serving table at batch one."""
        if data.get("kind") == "batch":  # a serving table's batch of one, at every B up to its longest
            verify, draft = ({int(n): float(s) for n, s in data[key]["1"].items()}
                             for key in ("verify", "draft"))
            sizes = range(1, max(verify) + 1)
            return cls({b: d if b > 1 else 0.0 for b, d in interpolated(draft, sizes).items()},
                       interpolated(verify, sizes), verify[1], machine=data.get("machine", ""),
                       context_length=int(data.get("context_length", 0)), source=data.get("source", ""),
                       drafter=data.get("drafter", ""))

        def by_size(key: str) -> dict[int, float]:
            return {int(b): float(s) for b, s in (data.get(key) or {}).items()}

        verify = by_size("verify_seconds")
        if not verify:
            raise ValueError("a cost table needs verify_seconds per block size")
        ar = data.get("ar_seconds", verify.get(1))
        if ar is None:
            raise ValueError("a cost table needs ar_seconds (or a B = 1 entry); remeasure it")
        return cls(by_size("draft_seconds"), verify, float(ar), data.get("threads"), data.get("dtype", ""),
                   data.get("device", ""), data.get("machine", ""), int(data.get("context_length", 0)),
                   int(data.get("repeats", 0)), by_size("spread"), tuple(data.get("warnings", ())),
                   data.get("source", ""), data.get("drafter", ""))


def interpolated(row: Mapping[int, float], sizes: Sequence[int]) -> dict[int, float]:
    """``row`` at each of ``sizes``: linear between its points, flat past its ends, 0 where it is empty."""
    points = sorted(row) or [1]
    return dict(zip(sizes, np.interp(sizes, points, [row.get(n, 0.0) for n in points]).tolist()))


def quartile_spread(times: Sequence[float]) -> float:
    """Relative interquartile range of ``times`` (a cell's ``spread``; 0 for one time or a median of 0)."""
    q1, median, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return (q3 - q1) / median if median > 0 else 0.0


def nearest_context(tables: Sequence[CostTable], context: int) -> CostTable:
    """Of tables at several context lengths, the one nearest ``context`` (ties: the longer)."""
    return min(tables, key=lambda table: (abs(table.context_length - context), -table.context_length))


def context_bucket(length: int, edges: Sequence[int] = CONTEXT_BUCKETS) -> str:
    """A prompt length's row label in the context map: ``"<512"``, ``"512-1023"``, ..., ``">=1536"``."""
    lower = max((edge for edge in edges if edge <= length), default=None)
    upper = min((edge for edge in edges if edge > length), default=None)
    return f"<{upper}" if lower is None else f">={lower}" if upper is None else f"{lower}-{upper - 1}"


def label_order(label: str) -> tuple[int, int, str]:
    """Sort key of row labels: :func:`context_bucket`'s buckets by length, any other label by name."""
    match = re.match(r"(<|>=)?(\d+)", label)
    if match is None:
        return 1, 0, label
    return 0, 2 * int(match[2]) + {"<": -1, ">=": 1}.get(match[1] or "", 0), label


def uniform_costs(block_sizes: Iterable[int], ar_seconds: float = 1.0, per_token: float = 0.0) -> CostTable:
    """A synthetic table: a cycle costs one AR step plus ``per_token`` AR steps per extra token."""
    sizes = sorted({int(b) for b in block_sizes} | {1})
    verify = {b: ar_seconds * (1 + per_token * (b - 1)) for b in sizes}
    return CostTable({b: 0.0 for b in sizes}, verify, ar_seconds, machine="synthetic")


def cheapest(seconds: np.ndarray) -> np.ndarray:
    """The column of the fewest seconds in each row of ``seconds`` [..., C], a tie going to the last (the
    larger block): the one rule of every fastest choice."""
    return seconds.shape[-1] - 1 - np.argmin(seconds[..., ::-1], axis=-1)


def expected_tokens(alpha: float, block_size: int) -> float:
    """Expected tokens per cycle at per-draft acceptance ``alpha``: (1 - alpha^B) / (1 - alpha)."""
    return (1 - alpha**block_size) / (1 - alpha)
