"""Batch-aware cost tables: what one engine step costs when several requests draft and verify together.

A :class:`BatchCostTable` holds, for each batch size b, the seconds of one target pass over b
sequences of n new tokens each (with the hidden states the drafter reads) and of one drafter pass
over b blocks of n. Costs of ragged steps are interpolated along the total tokens at the nearest
measured batch sizes. :meth:`BatchCostTable.at_concurrency` turns it into the per-request
:class:`~specpolicy.costs.CostTable` that cost-aware policies price their choices with under load.
Measured by ``specpolicy bench batch-latency``; no torch here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specpolicy.costs import CostTable


def _interpolate(points: Mapping[int, float], x: float) -> float:
    """Piecewise-linear in ``x`` through measured ``points`` (per-token slope of the last two beyond them)."""
    xs = sorted(points)
    ys = [points[k] for k in xs]
    if x <= xs[-1]:
        return float(np.interp(x, xs, ys))
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if len(xs) > 1 else 0.0
    return ys[-1] + slope * (x - xs[-1])


@dataclass(frozen=True)
class BatchCostTable:
    """``verify[b][n]``: seconds of a target pass over b sequences x n tokens; ``draft[b][n]``: a drafter pass
    over b blocks of n. ``lengths``: the per-sequence lengths measured."""

    verify: Mapping[int, Mapping[int, float]]
    draft: Mapping[int, Mapping[int, float]]
    threads: int | None = None
    machine: str = ""
    dtype: str = ""
    context_length: int = 0

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(self.verify))

    def _along_batch(self, table: Mapping[int, Mapping[int, float]], batch: int, total: int) -> float:
        sizes = self.batch_sizes
        if batch > sizes[-1]:
            raise ValueError(f"the batch cost table measured batch sizes up to {sizes[-1]}, not {batch}; remeasure "
                             f"with `specpolicy bench batch-latency --batch-sizes 1-{batch}`")
        below = max(b for b in sizes if b <= batch)
        above = min(b for b in sizes if b >= batch)

        def at(b: int) -> float:
            return _interpolate({b * n: s for n, s in table[b].items()}, total)

        if below == above:
            return at(below)
        share = (batch - below) / (above - below)
        return at(below) + share * (at(above) - at(below))

    def verify_seconds(self, lengths: Sequence[int]) -> float:
        """One target pass verifying ``lengths`` tokens for each sequence of the batch."""
        lengths = [n for n in lengths if n > 0]
        return self._along_batch(self.verify, len(lengths), sum(lengths)) if lengths else 0.0

    def draft_seconds(self, block_sizes: Sequence[int]) -> float:
        """One drafter pass over the blocks of the sequences that draft (B > 1)."""
        blocks = [b for b in block_sizes if b > 1]
        return self._along_batch(self.draft, len(blocks), sum(blocks)) if blocks else 0.0

    def step_seconds(self, actions: Sequence[tuple[int, int]]) -> float:
        """One engine step in which each active request runs a cycle (B, L)."""
        return self.draft_seconds([b for b, _ in actions]) + self.verify_seconds([v for _, v in actions])

    def at_concurrency(self, concurrency: int, block_sizes: Sequence[int]) -> CostTable:
        """Per-request costs when ``concurrency`` requests step together, each paying its share: a cycle of B
        costs (draft of c blocks of B + verify of c x B) / c. What cost-aware policies price with under load."""
        c = int(concurrency)
        sizes = sorted(set(block_sizes) | {1})
        return CostTable(
            draft_seconds={b: self.draft_seconds([b] * c) / c if b > 1 else 0.0 for b in sizes},
            verify_seconds={b: self.verify_seconds([b] * c) / c for b in sizes},
            ar_seconds=self.verify_seconds([1] * c) / c,
            threads=self.threads, dtype=self.dtype, machine=f"{self.machine}, batch of {c}",
            context_length=self.context_length,
        )

    def to_json(self) -> dict:
        def table(rows: Mapping[int, Mapping[int, float]]) -> dict:
            return {str(b): {str(n): s for n, s in row.items()} for b, row in rows.items()}

        return {"kind": "batch", "verify": table(self.verify), "draft": table(self.draft),
                "threads": self.threads, "machine": self.machine, "dtype": self.dtype,
                "context_length": self.context_length}

    @classmethod
    def from_json(cls, data: Mapping) -> BatchCostTable:
        def table(key: str) -> dict[int, dict[int, float]]:
            return {int(b): {int(n): float(s) for n, s in row.items()} for b, row in data[key].items()}

        if data.get("kind") != "batch":
            raise ValueError("not a batch cost table (measure one with `specpolicy bench batch-latency --out FILE`)")
        return cls(table("verify"), table("draft"), data.get("threads"), data.get("machine", ""),
                   data.get("dtype", ""), int(data.get("context_length", 0)))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> BatchCostTable:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read the batch cost table {path}: {error}") from None
        return cls.from_json(data)
