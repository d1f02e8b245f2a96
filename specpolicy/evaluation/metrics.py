"""Results of policies on prompts and the figures a comparison reports (no torch): pooled speedup over plain
AR as the headline, per-prompt median and p10, paired ratios with bootstrap intervals, tau as a diagnostic."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from specpolicy.costs import label_order
from specpolicy.cycles import CycleRecord
from specpolicy.defaults import BOOTSTRAP_RESAMPLES


@dataclass
class PromptResult:
    """One policy on one prompt: block sizes per cycle, tokens, seconds, and plain AR's seconds for them."""

    prompt_id: str
    block_sizes: list[int]
    tau: float
    tokens: int
    seconds: float
    ar_seconds: float | None
    """seconds plain AR decoding takes for the same tokens (modelled or measured, like ``seconds``)"""
    oracle_block_size: int | None = None
    cycles: int = 0
    """cycles the decode ran (0: unknown, a stored per-prompt tau)"""

    @property
    def chosen(self) -> int:
        """The first cycle's block size (a per-prompt policy's only one)."""
        return self.block_sizes[0] if self.block_sizes else 0

    @property
    def speedup(self) -> float:
        return self.ar_seconds / self.seconds if self.ar_seconds and self.seconds > 0 else float("nan")


@dataclass
class PolicyResults:
    """All prompts of one policy; ``timing`` is ``modelled`` (replay), ``measured`` (live) or ``none``."""

    policy: str
    timing: str
    prompts: list[PromptResult] = field(default_factory=list)

    def column(self, name: str) -> np.ndarray:
        """One field of every prompt as float64 [n]."""
        return np.array([getattr(p, name) if getattr(p, name) is not None else np.nan for p in self.prompts],
                        dtype=np.float64)

    def taus(self) -> np.ndarray:
        return self.column("tau")

    def speedup(self) -> float:
        """Pooled speedup over plain AR: AR seconds over the policy's, summed over prompts (the headline)."""
        return float(self.column("ar_seconds").sum() / self.column("seconds").sum())

    def tau(self) -> float:
        """tau pooled as the field pools it: committed tokens over cycles across every prompt; the mean of
        stored per-prompt taus where the cycles are unknown (an imported store of taus)."""
        cycles, taus = self.column("cycles"), self.taus()
        if cycles.sum() > 0:
            return float((taus * cycles).sum() / cycles.sum())
        return float(taus.mean()) if len(taus) else float("nan")

    @property
    def timed(self) -> bool:
        return self.timing != "none" and bool(np.all(self.column("seconds") > 0))


@dataclass
class SummaryRow:
    """One policy's figures over a prompt set (``nan`` where a figure needs what the run lacks)."""

    policy: str
    prompts: int
    timing: str
    speedup: float
    """pooled speedup over plain AR: AR seconds / policy seconds, summed over prompts"""
    speedup_ci95: tuple[float, float]
    vs_baseline: float
    """pooled speed of this policy / pooled speed of the baseline (e.g. fixed16), same prompts"""
    vs_baseline_ci95: tuple[float, float]
    tokens_per_s: float
    p10_speedup: float
    median_speedup: float
    tau: float
    delta_tau: float
    gain_share: float
    """(speed - baseline speed) / (oracle speed - baseline speed): share of the oracle's gain captured"""
    gain_share_ci95: tuple[float, float]
    oracle_agreement: float
    baseline: str = "fixed16"
    oracle: str = "oracle"

    def to_dict(self) -> dict:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, float) and not np.isfinite(value):
                data[key] = None  # JSON has no NaN
            elif isinstance(value, tuple):
                data[key] = [None if not np.isfinite(v) else round(v, 4) for v in value]
            elif isinstance(value, float):
                data[key] = round(value, 4)
        return data

    def table_row(self) -> dict[str, str]:
        """Short columns that fit a 100-column terminal (details: ``--format json``)."""
        def num(value: float, digits: int, suffix: str = "") -> str:
            return f"{value:.{digits}f}{suffix}" if np.isfinite(value) else "-"

        if self.timing == "none":  # a store of taus only (imported): no time, so no speed
            return {"policy": self.policy, "tau": num(self.tau, 2),
                    f"tau - {self.baseline}'s": num(self.delta_tau, 2),
                    "chose the best tau": num(100 * self.oracle_agreement, 0, "%")}
        low, high = self.vs_baseline_ci95
        return {"policy": self.policy, "speedup": num(self.speedup, 2, "x"),
                f"vs {self.baseline}": num(self.vs_baseline, 2, "x"),
                "95% CI": f"{low:.2f}-{high:.2f}" if np.isfinite(low) else "-",
                "tok/s": num(self.tokens_per_s, 0), "p10": num(self.p10_speedup, 2),
                "median": num(self.median_speedup, 2), "tau": num(self.tau, 2),
                "gain": num(self.gain_share, 2)}


def paired_interval(columns: Sequence[np.ndarray], statistic: Callable[..., np.ndarray],
                    n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of ``statistic(*columns, axis=-1)``, a function of the columns' sums (a ratio
    of sums), over prompts resampled together: the resamples of ``scipy.stats.bootstrap(paired=True,
    method="percentile")`` (tested), not imported; a resample's sums are its counts of each prompt times the
    column, read by ``statistic`` as columns of one prompt."""
    data = [np.asarray(c, dtype=np.float64) for c in columns]
    n = len(data[0])
    if n < 2 or any(not np.all(np.isfinite(c)) for c in data):
        return float("nan"), float("nan")
    counts = _resample_counts(n, n_resamples, seed)  # [resamples, prompts]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = statistic(*[(counts @ c)[:, None] for c in data], axis=-1)  # [resamples]
    if np.isnan(values).any():
        return float("nan"), float("nan")
    low, high = np.quantile(values, [0.025, 0.975])
    return float(low), float(high)


@lru_cache(maxsize=4)  # a few shapes (a comparison's, its labels'); 22 MB for 1,410 prompts
def _resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each resample draws each prompt, float [n_resamples, n] (read-only, drawn once per shape)."""
    rows = np.random.RandomState(seed).randint(0, n, (n_resamples, n)) + n * np.arange(n_resamples)[:, None]
    counts = np.bincount(rows.ravel(), minlength=n * n_resamples).reshape(n_resamples, n).astype(np.float64)
    counts.flags.writeable = False
    return counts


def _ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(a, axis=axis) / np.sum(b, axis=axis)


def speed_ratio(tokens_a, seconds_a, tokens_b, seconds_b, axis: int = -1) -> np.ndarray:
    return _ratio(tokens_a, seconds_a, axis) / _ratio(tokens_b, seconds_b, axis)


def _gain_share(tok_p, sec_p, tok_b, sec_b, tok_o, sec_o, axis: int = -1) -> np.ndarray:
    speed_p, speed_b = _ratio(tok_p, sec_p, axis), _ratio(tok_b, sec_b, axis)
    speed_o = _ratio(tok_o, sec_o, axis)
    gap = speed_o - speed_b
    return np.where(gap > 0, (speed_p - speed_b) / np.where(gap > 0, gap, 1.0), np.nan)


OVERALL = "all"
"""the label of the row over every prompt in a per-category report"""


def split_by(results: Sequence[PolicyResults],
             labels: Mapping[str, str]) -> list[tuple[str, list[PolicyResults]]]:
    """The same policies' results per label (a prompt's category or group, from ``labels`` by prompt id;
    unlabelled prompts under ``-``), labels sorted, then :data:`OVERALL` over every prompt."""
    named = {p.prompt_id: labels.get(p.prompt_id) or "-" for r in results for p in r.prompts}
    parts = []
    for label in sorted(set(named.values()), key=label_order):
        parts.append((label,
                      [PolicyResults(r.policy, r.timing,
                                     [p for p in r.prompts if named[p.prompt_id] == label])
                              for r in results]))
    return [*parts, (OVERALL, list(results))]


def summarize(results: Sequence[PolicyResults], baseline: str = "fixed16", oracle: str = "oracle",
              n_bootstrap: int = BOOTSTRAP_RESAMPLES) -> list[SummaryRow]:
    """One row per policy: pooled speedup over AR, speed vs ``baseline``, share of ``oracle``'s gain."""
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be at least 1 (the paired bootstrap's resamples), got "
                         f"{n_bootstrap}")
    by_name = {r.policy: r for r in results}
    base, orc = by_name.get(baseline), by_name.get(oracle)
    return [_summary_row(result, base, orc, baseline, oracle, n_bootstrap) for result in results]


def _summary_row(result: PolicyResults, base: PolicyResults | None, orc: PolicyResults | None, baseline: str,
                 oracle: str, n_bootstrap: int) -> SummaryRow:
    nan, no_ci = float("nan"), (float("nan"), float("nan"))
    tokens, seconds, ar = result.column("tokens"), result.column("seconds"), result.column("ar_seconds")
    timed = result.timed
    per_prompt = np.array([p.speedup for p in result.prompts]) if timed else np.array([nan])
    labels = [p.oracle_block_size for p in result.prompts]
    agreement = (float(np.mean([p.chosen == o for p, o in zip(result.prompts, labels)]))
                 if labels and all(o is not None for o in labels) else nan)
    row = SummaryRow(
        result.policy, len(result.prompts), result.timing,
        speedup=result.speedup() if timed else nan,
        speedup_ci95=paired_interval([ar, seconds], _ratio, n_bootstrap) if timed else no_ci,
        vs_baseline=nan, vs_baseline_ci95=no_ci,
        tokens_per_s=float(tokens.sum() / seconds.sum()) if timed else nan,
        p10_speedup=float(np.nanpercentile(per_prompt, 10)) if timed else nan,
        median_speedup=float(np.nanmedian(per_prompt)) if timed else nan,
        tau=result.tau(), delta_tau=nan, gain_share=nan, gain_share_ci95=no_ci,
        oracle_agreement=agreement, baseline=baseline, oracle=oracle,
    )
    if base is None:
        return row
    row.delta_tau = result.tau() - base.tau()
    if not (timed and base.timed):
        return row
    paired = [tokens, seconds, base.column("tokens"), base.column("seconds")]
    row.vs_baseline = float(speed_ratio(*paired))
    row.vs_baseline_ci95 = paired_interval(paired, speed_ratio, n_bootstrap)
    if orc is not None and orc.timed:
        triple = [*paired, orc.column("tokens"), orc.column("seconds")]
        row.gain_share = float(_gain_share(*triple))
        row.gain_share_ci95 = paired_interval(triple, _gain_share, n_bootstrap)
    return row


def cycle_rows(cycles: Sequence[CycleRecord]) -> list[tuple[int, int, int, int]]:
    """(block size, verify length, accepted drafts, committed tokens) per cycle: what two decodes of one
    prompt must agree on (replay and live, two devices, specpolicy's loop and transformers')."""
    return [(c.block_size, c.verify_length, c.accepted, c.committed) for c in cycles]

def cycles_agree(live: Sequence[CycleRecord], replayed: Sequence[CycleRecord]) -> tuple[int, int, int | None]:
    """(cycles whose :func:`cycle_rows` are equal, cycles compared = the longer decode's, the first that
    differs or ``None``): the one rule every benchmark judges by (replay and live, devices, the two loops)."""
    a, b = cycle_rows(live), cycle_rows(replayed)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                 None if len(a) == len(b) else min(len(a), len(b)))
    return sum(x == y for x, y in zip(a, b)), max(len(a), len(b)), first
