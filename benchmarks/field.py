"""The field's controllers at their defaults beside every fixed block, the default, BlockPilot and the
per-prompt and per-step oracles, cell by cell (cost table x concurrency) by exact replay of one sweep; each
cell is one ``specpolicy compare`` with the default as the baseline, so every ratio is paired with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import DEFAULT_POLICY
from specpolicy.evaluation.compare import compare_sweep

MLX_VLM_DFLASH2 = "mlx-vlm:block_size=8,first_block=3,min_block_size=3"
"""mlx-vlm's rule as its DFlash2 drafter runs it (``DFlash2DraftModel``: first and least block 3, block 8)"""
FIELD = ("dflash-mlx", "dflash-mlx-count", "sglang-adaptive", "sglang-dflash-verify", "mistralrs-dflash",
         "mistralrs-adaptive", "mistralrs-autotune", "mlx-vlm", "ollama", "llamacpp-streak", "llamacpp-ema",
         "llamacpp-pmin", "heuristic", "vllm-dsd", "trtllm-schedule", MLX_VLM_DFLASH2)
"""the field's controllers at their defaults (``heuristic``: Hugging Face's and llama.cpp #3006's rule)"""
GRIDS = {
    "dflash-mlx": ["window_size=2,4,8", "tpc_threshold=2,2.5,3,3.5,4", "min_block_tokens=2,4,6,8"],
    "dflash-mlx-count": ["window_size=2,4,8", "low_commit_threshold=2,3,4,5", "min_block_tokens=2,4,8",
                         "reduced_burst_cycles=8,24,64"],
    "sglang-adaptive": ["candidate_steps=1/3/7,1/3/5/7,3/7/15,1/3/7/15", "ema_alpha=0.1,0.2,0.4",
                        "update_interval=1,5", "down_hysteresis=-0.5,-0.25,0"],
    "sglang-dflash-verify": ["candidate_steps=3/7/11/15,1/3/7/15,3/7/15", "ema_alpha=0.1,0.2,0.4",
                             "update_interval=1,5", "down_hysteresis=-0.5,-0.25,0"],
    "mistralrs-dflash": ["max_drafts=3,5,7,11,15"],
    "mistralrs-adaptive": ["tiers=3/5,2/4,4/8", "max_drafts=7,11,15", "ema_alpha=0.2,0.4", "sticky=1,4"],
    "mistralrs-autotune": ["depths=2/3/4/6,1/3/7/11,3/7/11/15", "max_drafts=7,11,15",
                           "switch_margin=1,1.03,1.1", "probe_interval=8,32"],
    "mlx-vlm": ["window=2,4,8,16", "min_block_size=1,2,4,8", "first_block=0,4,8"],
    "ollama": ["probe_interval=2,4,8", "acceptance_min_samples=3,5,10", "acceptance_alpha=0.1,0.3"],
    "llamacpp-streak": ["threshold=2,5,11", "bias=0,1", "n_min=0,1", "n_max=3,7,15"],
    "llamacpp-ema": ["alpha=0.25,0.5", "probe=0.5,1,2", "n_max=3,7,15"],
}
"""each field controller's tuning grid (``specpolicy tune RULE --grid ...``)"""
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


def bench_field(sweep: Path, cells: list[Cell], fixed: list[int], default: str = DEFAULT_POLICY
                ) -> list[Verdict]:
    """Every cell's verdicts: the field, the references and ``fixed`` blocks (``fixed1``: plain decoding);
    ``default``: the baseline (``adaptive``, the default's guard, on a store without prefill logits, where
    neither the default nor BlockPilot runs)."""
    references = REFERENCES if default == DEFAULT_POLICY else (default, *REFERENCES[2:])
    policies = [*references, *FIELD, *(f"fixed{b}" for b in fixed)]
    verdicts = []
    for cell in cells:
        rows = compare_sweep(sweep, policies, costs=[cell.costs] if cell.costs else (),
                             baseline=default, candidates=fixed, concurrency=(cell.concurrency,),
                             batch_costs=cell.batch_costs, decode_only=cell.batch_costs is not None)
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


def bench_tune(sweep: Path, cells: list[Cell], fixed: list[int]) -> list[dict]:
    """Per cell at concurrency 1 and per controller of :data:`GRIDS`: the setting tuned on the training side,
    held out (validation side) against its defaults and against the default, both paired."""
    from specpolicy.evaluation.tune import parse_grid, settings, tune

    rows = []
    for cell in (c for c in cells if c.concurrency == 1 and c.batch_costs is None):
        costs = [cell.costs] if cell.costs else ()
        tuned = {rule: tune(sweep, rule, settings(rule, parse_grid(grid)), costs=costs, fixed=fixed)
                 for rule, grid in GRIDS.items()}
        against = {r.row.policy: r.row for r in compare_sweep(
            sweep, list(dict.fromkeys([DEFAULT_POLICY, *(t.setting for t in tuned.values())])), costs=costs,
            candidates=fixed, split="validation", baseline=DEFAULT_POLICY)}
        for rule, result in tuned.items():
            best = next(r for r in result.held_out if r.policy == result.setting)
            defaults = next(r for r in result.held_out if r.policy == rule)
            other = against[result.setting]
            rows.append({"cell": cell.label, "rule": rule, "tuned": result.setting.partition(":")[2] or "-",
                         "defaults": round(defaults.speedup, 3), "tuned speedup": round(best.speedup, 3),
                         "tuned / defaults": _ratio(best.vs_baseline, best.vs_baseline_ci95),
                         "default": round(against[DEFAULT_POLICY].speedup, 3),
                         "default / tuned": _ratio(1 / other.vs_baseline,
                                                   tuple(1 / v for v in reversed(other.vs_baseline_ci95)))})
    return rows


def _ratio(value: float, interval: tuple[float, float]) -> str:
    return f"{value:.3f} ({interval[0]:.3f}-{interval[1]:.3f})"
