"""Batch-aware cost tables (no torch): per batch size b, a target pass over b x n tokens and a drafter pass
over b blocks of n; :meth:`BatchCostTable.at_concurrency`: a :class:`~specpolicy.costs.CostTable`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from specpolicy.arguments import check_candidate_set, check_count, check_counts, check_drafter_kind
from specpolicy.costs import CostTable, TableFile, expected_tokens
from specpolicy.defaults import ACCEPTANCE_PRIOR, BATCH_DRAFT_MARGIN, MAX_LATENCY_SPREAD


def _interpolate(points: Mapping[int, float], x: float) -> float:
    """Piecewise-linear in ``x`` through measured ``points`` (per-token slope of the last two beyond them)."""
    xs = sorted(points)
    ys = [points[k] for k in xs]
    if x <= xs[-1]:
        return float(np.interp(x, xs, ys))
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if len(xs) > 1 else 0.0
    return ys[-1] + slope * (x - xs[-1])


@dataclass(frozen=True)
class BatchCostTable(TableFile):
    """``verify[b][n]``: seconds of a target pass over b sequences x n tokens; ``draft[b][n]``: a drafter pass
    over b blocks of n. ``lengths``: the per-sequence lengths measured."""

    WHAT, MEASURE, OPTION = "batch cost table", "bench batch-latency", "--batch-costs"
    SHIPPED = "aic-h200-sxm-vllm-qwen3-8b-dflash-context-1024"

    verify: Mapping[int, Mapping[int, float]]
    draft: Mapping[int, Mapping[int, float]]
    threads: int | None = None
    machine: str = ""
    dtype: str = ""
    context_length: int = 0
    spread: Mapping[int, Mapping[int, float]] = field(default_factory=dict)
    """``spread[b][n]``: relative interquartile range of the target pass's repeats (empty: not measured)"""
    source: str = ""
    """provenance of a table not measured here (where its numbers come from, versions, licence)"""
    drafter: str = ""
    """how its drafter drafts (:data:`~specpolicy.defaults.DRAFTER_KINDS`; empty: a block drafter)"""
    capacity: str = ""
    """why it prices no larger batch (a composed table: its GPU's KV cache is full); empty: measured"""
    prefill: Mapping[int, float] = field(default_factory=dict)
    """``prefill[n]``: seconds of one request's prefill of n prompt tokens (empty: not priced)"""

    def __post_init__(self) -> None:
        check_drafter_kind(self.drafter, "a batch cost table")

    def check(self, max_spread: float = MAX_LATENCY_SPREAD) -> list[str]:
        """Problems that make the table untrustworthy, as :meth:`CostTable.check` finds them: a time that is
        not a positive finite number, noisy repeats, a pass costing less with more tokens or sequences."""
        points = [(name, b, n, s) for name, rows in (("verify", self.verify), ("draft", self.draft),
                                                     ("prefill", {1: self.prefill}))  # one request's
                  for b, row in rows.items() for n, s in row.items()]
        bad = [f"{name}[{b}][{n}] = {s}" for name, b, n, s in points if not (math.isfinite(s) and s > 0)]
        if bad:
            return [f"not a positive finite number of seconds: {', '.join(bad[:4])}"]
        problems = []
        noisy = [(b, n, s) for b, row in self.spread.items() for n, s in row.items() if s > max_spread]
        if noisy:
            b, n, s = max(noisy, key=lambda point: point[2])
            problems.append(f"noisy: {len(noisy)} points vary by more than {max_spread:.0%} between repeats "
                            f"(worst: batch {b} x {n} tokens, {s:.0%})")
        problems += self._falling(max_spread)
        return problems

    def _falling(self, max_spread: float) -> list[str]:
        """Target passes costing less with more tokens per sequence or more sequences (beyond noise)."""
        falling = []
        for b, row in self.verify.items():
            tolerance = 1 + max(max(self.spread.get(b, {}).values(), default=0.0), 0.05)
            lengths = sorted(row)
            falling += [f"batch {b}: {n2} tokens ({1e3 * row[n2]:.2f} ms) < {n1} ({1e3 * row[n1]:.2f} ms)"
                        for n1, n2 in pairwise(lengths) if row[n2] * tolerance < row[n1]]
        batches = sorted(self.verify)
        for b1, b2 in pairwise(batches):
            falling += [f"{n} tokens: batch {b2} ({1e3 * self.verify[b2][n]:.2f} ms) < batch {b1} "
                        f"({1e3 * self.verify[b1][n]:.2f} ms)" for n in self.verify[b1]
                        if n in self.verify[b2] and self.verify[b2][n] * 1.05 < self.verify[b1][n]]
        return [f"not monotone: {'; '.join(falling[:3])}"] if falling else []

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(self.verify))

    def check_batches(self, batches: Sequence[int], option: str = "--concurrency") -> None:
        """Refuse batches past the largest this table prices, naming the range of ``option`` it prices (a
        composed or shipped GPU table cannot be remeasured on this machine)."""
        wanted = check_counts(batches, option)
        smallest, largest, fewest, wanted = self.batch_sizes[0], self.batch_sizes[-1], wanted[0], wanted[-1]
        if fewest < smallest:
            raise ValueError(f"the batch cost table ({self.machine or 'unnamed'}) prices batches from "
                             f"{smallest}, not {fewest}: pass {option} {smallest} or more, or a table that "
                             "prices one request (`specpolicy bench serving-costs --batch-sizes 1-N` or "
                             "`bench batch-latency`)")
        if wanted <= largest:
            return
        fix = (f"{self.capacity}; pass {option} 1-{largest}, or compose a table for more (`specpolicy "
               f"bench serving-costs --batch-sizes 1-{wanted}`: it stops where the cache is full, later at a "
               "shorter context or on a GPU with more memory)" if self.capacity else
               f"pass {option} 1-{largest}, or a table that reaches {wanted} (`specpolicy bench "
               f"batch-latency --batch-sizes 1-{wanted}` measures this machine's)")
        raise ValueError(f"the batch cost table ({self.machine or 'unnamed'}) prices batches up to "
                         f"{largest}, not {wanted}: {fix}")

    def _along_batch(self, table: Mapping[int, Mapping[int, float]], batch: int, total: int) -> float:
        sizes = self.batch_sizes
        if not sizes[0] <= batch <= sizes[-1]:  # the one refusal, only where it applies (twice a served step)
            self.check_batches([batch])
        below = max(b for b in sizes if b <= batch)
        above = min(b for b in sizes if b >= batch)

        def at(b: int) -> float:
            return _interpolate({b * n: s for n, s in table[b].items()}, total)

        if below == above:
            return at(below)
        share = (batch - below) / (above - below)
        return at(below) + share * (at(above) - at(below))

    def prefill_seconds(self, prompt_length: int) -> float:
        """One request's prefill of ``prompt_length`` tokens, interpolated (0 where the table prices none)."""
        return _interpolate(self.prefill, prompt_length) if self.prefill else 0.0

    def verify_cost(self, lengths: Sequence[int]) -> float:
        """One target pass verifying ``lengths`` tokens for each sequence of the batch."""
        lengths = [n for n in lengths if n > 0]
        return self._along_batch(self.verify, len(lengths), sum(lengths)) if lengths else 0.0

    def draft_cost(self, block_sizes: Sequence[int]) -> float:
        """The drafting of the sequences that draft (B > 1): a block drafter's one pass over their blocks
        (their total); a chain drafter's passes, one per drafted position, each over the sequences still
        drafting (``draft[n][2]``: one pass at batch n), until the longest block is drafted."""
        blocks = [b for b in block_sizes if b > 1]
        if self.drafter != "chain":
            return self._along_batch(self.draft, len(blocks), sum(blocks)) if blocks else 0.0
        seconds, drafted, ascending = 0.0, 1, sorted(blocks)
        for i, block in enumerate(ascending):  # passes drafted + 1 .. block: over the len - i still drafting
            if block > drafted:
                n = len(ascending) - i
                seconds += (block - drafted) * self._along_batch(self.draft, n, 2 * n)
                drafted = block
        return seconds

    def step_seconds(self, actions: Sequence[tuple[int, int]]) -> float:
        """One engine step in which each active request runs a cycle (B, L)."""
        return self.draft_cost([b for b, _ in actions]) + self.verify_cost([v for _, v in actions])

    def at_concurrency(self, concurrency: int, block_sizes: Sequence[int]) -> CostTable:
        """Per-request costs at ``concurrency`` c: a cycle of B costs (draft of c blocks + verify of c x B) /
        c; a plain step beside drafting requests shares their drafter pass (the others draft where some block
        pays at the prior acceptance by :data:`~specpolicy.defaults.BATCH_DRAFT_MARGIN`, else they step
        plainly too); ``ar_seconds``: a c-request AR step / c."""
        c = check_count(concurrency, "concurrency")
        sizes = sorted({*check_candidate_set(block_sizes, "block_sizes"), 1})
        draft = {b: self.draft_cost([b] * c) for b in sizes}  # one batched pass of each size, priced once
        verify = {b: self.verify_cost([b] * c) for b in sizes}
        drafts = any(expected_tokens(ACCEPTANCE_PRIOR, b) * verify[1] >= (1 + BATCH_DRAFT_MARGIN) *
                     (draft[b] + verify[b]) for b in sizes[1:])
        others = [(sizes[1], sizes[1]) if drafts else (1, 1)] * (c - 1)
        beside_others = self.step_seconds([*others, (1, 1)])
        return CostTable(
            draft_seconds={b: draft[b] / c for b in sizes},
            verify_seconds={b: (verify[b] if b > 1 else beside_others) / c for b in sizes},
            ar_seconds=verify[1] / c,
            threads=self.threads, dtype=self.dtype, machine=f"{self.machine}, batch of {c}",
            context_length=self.context_length, source=self.source, drafter=self.drafter,
        )

    def to_json(self) -> dict:
        def table(rows: Mapping[int, Mapping[int, float]]) -> dict:
            return {str(b): {str(n): s for n, s in row.items()} for b, row in rows.items()}

        return {"kind": "batch", "verify": table(self.verify), "draft": table(self.draft),
                "spread": table(self.spread), "threads": self.threads, "machine": self.machine,
                "dtype": self.dtype,
                "context_length": self.context_length, "source": self.source, "drafter": self.drafter,
                "capacity": self.capacity, "prefill": {str(n): s for n, s in self.prefill.items()},
                "warnings": self.check()}

    @classmethod
    def from_json(cls, data: Mapping) -> BatchCostTable:
        def table(key: str) -> dict[int, dict[int, float]]:
            return {int(b): {int(n): float(s) for n, s in row.items()} for b, row in data[key].items()}

        if data.get("kind") != "batch":
            raise ValueError("not a batch cost table (measure one with `specpolicy bench batch-latency "
                             "--out FILE`)")
        return cls(table("verify"), table("draft"), data.get("threads"), data.get("machine", ""),
                   data.get("dtype", ""), int(data.get("context_length", 0)),
                   table("spread") if "spread" in data else {}, data.get("source", ""),
                   data.get("drafter", ""), data.get("capacity", ""),
                   {int(n): float(s) for n, s in data.get("prefill", {}).items()})
