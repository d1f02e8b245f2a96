"""A cost table from an engine's own timings (``specpolicy bench from-run``): draft by block and verify by
tokens verified, each the mean of the run's cycles, with every cell's spread (flagged when noisy) and its
cliffs, widths whose verify jumps well past the trend of the narrower ones (mlx #3791). No torch."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from specpolicy.costs import CostTable, interpolated, quartile_spread

CLIFF_SLOPE = 3.0
"""a width is a cliff where its cost per added row is at least this many times the median per-row step"""
CLIFF_JUMP = 0.10
"""... and it costs at least this share more than the next narrower width measured"""


class Timed(Protocol):
    """One cycle as an engine timed it (:class:`~specpolicy.sweep.traces.dflash_mlx.Cycle`)."""

    block: int
    verified: int
    draft_seconds: float
    verify_seconds: float


@dataclass(frozen=True)
class FittedTable:
    """The fitted ``table``, the cycles behind each verify width and the ``cliffs`` found."""

    table: CostTable
    cycles: dict[int, int]
    cliffs: tuple[int, ...]

    def rows(self) -> list[dict]:
        """One row per verify width: its cost, spread, cycles and whether it is a cliff."""
        table = self.table
        return [{"tokens verified": width, "verify ms": round(1e3 * seconds, 3),
                 "draft ms": round(1e3 * table.draft_seconds.get(width, 0.0), 3),
                 "spread": f"{table.spread[width]:.0%}" if width in table.spread else "-",
                 "cycles": self.cycles.get(width, 0),
                 "cliff": "cliff" if width in self.cliffs else ""}
                for width, seconds in sorted(table.verify_seconds.items())]


def cliffs(verify: dict[int, float]) -> tuple[int, ...]:
    """Widths whose verify cost per added row is >= :data:`CLIFF_SLOPE` times the median such step and
    >= :data:`CLIFF_JUMP` above the next narrower width measured."""
    widths = sorted(verify)
    slopes = {w: (verify[w] - verify[v]) / (w - v) for v, w in itertools.pairwise(widths)}
    typical = float(np.median([max(s, 0.0) for s in slopes.values()])) if slopes else 0.0
    return tuple(w for v, w in itertools.pairwise(widths)
                 if slopes[w] >= CLIFF_SLOPE * typical and verify[w] >= (1 + CLIFF_JUMP) * verify[v])


def fit(verify: dict[int, list[float]], draft: dict[int, list[float]], source: str,
        ar_seconds: float | None = None) -> FittedTable:
    """A table from seconds per verify width and per drafted block: the plain step is the one-token verify
    (a cycle of B = 1), else ``ar_seconds``, else extrapolated from the two narrowest widths (warned)."""
    if not verify:
        raise ValueError(f"{source} times no verify; it holds no cycles to fit a table from")
    means = {w: float(np.mean(s)) for w, s in verify.items()}
    warnings = []
    if ar_seconds is None and 1 in means:
        ar_seconds = means[1]
    elif ar_seconds is None:
        widths = sorted(means)
        if len(widths) < 2:
            raise ValueError(f"{source} times one verify width ({widths[0]}) and no plain step; pass the "
                             "plain step's seconds (--ar-seconds) or a run with more widths")
        a, b = widths[:2]
        ar_seconds = max(means[a] - (a - 1) * (means[b] - means[a]) / (b - a), 0.5 * means[a])
        warnings.append(f"the plain step is extrapolated from verifies of {a} and {b} tokens")
    found, measured = cliffs(means), sorted(means)
    narrower = dict(zip(measured[1:], measured))  # each width -> the next narrower one measured
    warnings += [f"cliff at {w} tokens verified: {means[w] / means[narrower[w]]:.2f}x the cost of "
                 f"{narrower[w]}" for w in found]
    widths = range(measured[0], measured[-1] + 1)  # every block between, as a serving table has
    if filled := [w for w in widths if w not in means]:
        warnings.append(f"verify widths {_spans(filled)} interpolated linearly between the measured ones")
    drafted = {b: float(np.mean(s)) for b, s in draft.items() if b > 1}
    draft_means = {1: 0.0} | interpolated(drafted, [w for w in widths if w > 1]) | drafted
    table = CostTable(draft_means, interpolated(means, widths), float(ar_seconds),
                      machine=f"fitted from {source}", source=source, repeats=min(map(len, verify.values())),
                      spread={w: quartile_spread(s) for w, s in verify.items()}, warnings=tuple(warnings))
    return FittedTable(table, {w: len(s) for w, s in verify.items()}, found)


def _spans(widths: list[int]) -> str:
    """``[2, 4, 6, 7]`` as ``2, 4, 6-7``."""
    runs = [[w for _, w in run] for _, run in itertools.groupby(enumerate(widths), lambda p: p[1] - p[0])]
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def fit_cycles(cycles: Iterable[Timed], source: str, ar_seconds: float | None = None) -> FittedTable:
    """:func:`fit` over an engine's timed cycles (dflash-mlx's ``cycle_events.jsonl``)."""
    verify: dict[int, list[float]] = {}
    draft: dict[int, list[float]] = {1: [0.0]}
    for cycle in cycles:
        verify.setdefault(cycle.verified, []).append(cycle.verify_seconds)
        if cycle.block > 1:
            draft.setdefault(cycle.block, []).append(cycle.draft_seconds)
    return fit(verify, draft, source, ar_seconds)


def fit_csv(file: str | Path, draft_seconds: float, ar_seconds: float | None = None) -> FittedTable:
    """:func:`fit` over a CSV of ``tokens,seconds`` rows (a header, ``#`` comments), one target verify each,
    and one drafter pass a user measured (``draft_seconds``, the same at every block)."""
    file = Path(file)
    rows = [(n, r) for n, r in enumerate(csv.reader(file.read_text().splitlines()), 1)
            if r and r[0].strip() and not r[0].lstrip().startswith("#")]  # blank lines and comments skipped
    verify: dict[int, list[float]] = {}
    for index, (number, row) in enumerate(rows):
        try:
            tokens, seconds = int(row[0]), float(row[1])
            if tokens < 1 or not np.isfinite(seconds) or seconds <= 0:
                raise ValueError
        except (ValueError, IndexError):
            if index == 0:
                continue  # a header
            raise ValueError(f"{file}, line {number}: expected tokens (an integer >= 1) and seconds (> 0), "
                             f"got {row!r}") from None
        verify.setdefault(tokens, []).append(seconds)
    return fit(verify, {1: [0.0], **{w: [draft_seconds] for w in verify if w > 1}}, str(file), ar_seconds)
