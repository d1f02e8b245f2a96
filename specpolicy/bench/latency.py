"""``specpolicy bench latency``: measure a cost table and check it against real decodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specpolicy.costs import CostTable
from specpolicy.decoding import SpeculativeDecoder, plain_decode


@dataclass
class DecodeCheck:
    """Measured decode seconds (prefill excluded) against the table's modelled seconds for the same cycles."""

    label: str
    measured: float
    modelled: float

    @property
    def error(self) -> float:
        """modelled / measured - 1."""
        return self.modelled / self.measured - 1 if self.measured > 0 else float("nan")


def check_against_decodes(decoder: SpeculativeDecoder, costs: CostTable, prompts: Sequence[list[int]],
                          block_size: int, seed: int = 0) -> list[DecodeCheck]:
    """Decode ``prompts`` with plain AR and at ``block_size``; compare wall time with the modelled time (off
    by more than about 10%: the table was measured under load, or decodes pay costs it does not see)."""
    ar_measured = ar_modelled = spec_measured = spec_modelled = 0.0
    for ids in prompts:
        ar = plain_decode(decoder, ids, seed=seed)
        ar_measured += ar.decode_seconds
        ar_modelled += len(ar.cycles) * costs.ar_seconds
        spec = decoder.generate(ids, block_size, seed=seed)
        spec_measured += spec.decode_seconds
        spec_modelled += costs.seconds(c.block_size for c in spec.cycles)
    return [DecodeCheck("plain AR", ar_measured, ar_modelled),
            DecodeCheck(f"fixed B = {block_size}", spec_measured, spec_modelled)]


def table_rows(costs: CostTable) -> list[dict]:
    """One row per block size: draft, verify and cycle milliseconds, the cycle in AR steps, the spread."""
    rows = [{"B": "AR step", "draft ms": "-", "verify ms": f"{1e3 * costs.ar_seconds:.2f}",
             "cycle ms": f"{1e3 * costs.ar_seconds:.2f}", "AR steps": "1.00",
             "spread": f"{costs.spread.get(0, float('nan')):.0%}"}]
    for size in costs.block_sizes:
        rows.append({"B": str(size), "draft ms": f"{1e3 * costs.draft_seconds.get(size, 0.0):.2f}",
                     "verify ms": f"{1e3 * costs.verify_seconds[size]:.2f}",
                     "cycle ms": f"{1e3 * costs.cycle_seconds(size):.2f}",
                     "AR steps": f"{costs.in_ar_steps(size):.2f}",
                     "spread": f"{costs.spread.get(size, float('nan')):.0%}"})
    return rows
