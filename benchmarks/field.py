"""The field's controllers at their defaults beside every fixed block, the default, BlockPilot and the
per-prompt and per-step oracles, cell by cell (cost table x concurrency) by exact replay of one sweep; each
cell is one ``specpolicy compare`` with the default as the baseline, so every ratio is paired with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import DEFAULT_POLICY
from specpolicy.evaluation.compare import compare_sweep

FIELD = ("dflash-mlx", "dflash-mlx-count", "sglang-adaptive", "mistralrs-dflash", "mistralrs-adaptive",
         "llamacpp-streak", "llamacpp-ema", "llamacpp-pmin", "heuristic", "vllm-dsd", "trtllm-schedule")
"""the field's controllers at their defaults (``heuristic``: Hugging Face's and llama.cpp #3006's rule)"""
REFERENCES = (DEFAULT_POLICY, "blockpilot", "oracle", "oracle-step")
MARGIN = 0.99
"""the default holds a cell where every controller's paired interval (default over it) starts at >= this and
its speed is >= this times the best fixed block's"""


@dataclass(frozen=True)
class Cell:
    """One cost table (``None``: the sweep's own) at one concurrency (``batch_costs`` above 1)."""

    label: str
    costs: Path | None = None
    concurrency: int = 1
    batch_costs: Path | None = None


@dataclass(frozen=True)
class Verdict:
    cell: str
    policy: str
    speedup: float
    """pooled over plain decoding"""
    default_over: float
    """the default's pooled speed over this policy's, with its paired 95% interval"""
    low: float
    high: float

    def to_dict(self) -> dict:
        return {"cell": self.cell, "policy": self.policy, "speedup": round(self.speedup, 3),
                "default over": round(self.default_over, 3),
                "95% CI": f"{self.low:.3f}-{self.high:.3f}"}


def bench_field(sweep: Path, cells: list[Cell], fixed: list[int]) -> list[Verdict]:
    """Every cell's verdicts: the field, the references and ``fixed`` blocks (``fixed1``: plain decoding)."""
    policies = [*REFERENCES, *FIELD, *(f"fixed{b}" for b in fixed)]
    verdicts = []
    for cell in cells:
        rows = compare_sweep(sweep, policies, costs=[cell.costs] if cell.costs else (),
                             baseline=DEFAULT_POLICY, candidates=fixed, concurrency=(cell.concurrency,),
                             batch_costs=cell.batch_costs)
        for row in (r.row for r in rows):
            low, high = row.vs_baseline_ci95
            verdicts.append(Verdict(cell.label, row.policy, row.speedup, 1 / row.vs_baseline, 1 / high,
                                    1 / low))
    return verdicts


def holds(verdicts: list[Verdict]) -> dict[str, list[str]]:
    """Per cell, what beats the default: field controllers whose interval starts below :data:`MARGIN`, and
    the best fixed block where the default is under :data:`MARGIN` of it."""
    beaten: dict[str, list[str]] = {}
    for cell in dict.fromkeys(v.cell for v in verdicts):
        rows = [v for v in verdicts if v.cell == cell]
        best = max((v for v in rows if v.policy.startswith("fixed")), key=lambda v: v.speedup)
        beaten[cell] = [v.policy for v in rows if v.policy in FIELD and v.low < MARGIN] + \
            ([f"{best.policy} (best fixed)"] if best.default_over < MARGIN else [])
    return beaten
