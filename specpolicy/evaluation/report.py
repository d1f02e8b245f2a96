"""Plots of a comparison: pooled speedup (or tau) per policy and the distribution of chosen block sizes."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from specpolicy.costs import label_order
from specpolicy.evaluation.metrics import PolicyResults
from specpolicy.files import atomic_path


def save_figure(fig, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (folders created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def _headline(result: PolicyResults, timed: bool) -> float:
    """Pooled speedup over plain AR, or mean tau when the run is untimed."""
    return result.speedup() if timed else result.tau()


def _grouped_bars(axes, slots: int, series: Sequence[tuple[str, Sequence[float]]]) -> None:
    """Draw each series' values [slots] as bars side by side in every slot, labelled for a legend."""
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series):
        axes.bar([k + (i - len(series) / 2) * width + width / 2 for k in range(slots)], values, width=width,
                 label=label)


def plot_comparison(results: Sequence[PolicyResults], path: str | Path, title: str = "") -> Path:
    """Save pooled speedup over AR per policy (mean tau untimed) and a histogram of its block sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r.policy for r in results]
    timed = all(r.timed for r in results)
    if timed:
        left.axhline(1.0, color="0.5", linewidth=1, linestyle="--")
        left.set_ylabel(f"pooled speedup over plain AR ({results[0].timing})")
        left.set_title("speed per policy")
    else:
        left.set_ylabel("mean tau (accepted + 1 per cycle)")
        left.set_title("tau per policy")
    left.bar(names, [_headline(r, timed) for r in results], color="#4c72b0")
    left.tick_params(axis="x", rotation=40)
    plt.setp(left.get_xticklabels(), ha="right", rotation_mode="anchor")  # long names end under their bar
    sizes = sorted({b for r in results for p in r.prompts for b in p.block_sizes})
    shares = []
    for result in results:
        counts = Counter(b for p in result.prompts for b in p.block_sizes)
        total = max(1, sum(counts.values()))
        shares.append((result.policy, [counts[s] / total for s in sizes]))
    _grouped_bars(right, len(sizes), shares)
    right.set_xticks(range(len(sizes)))
    right.set_xticklabels([str(b) for b in sizes])
    right.set_xlabel("block size")
    right.set_ylabel("share of cycles")
    right.set_title("chosen block sizes")
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_by_label(parts: Sequence[tuple[str, Sequence[PolicyResults]]], path: str | Path, by: str,
                  title: str = "") -> Path:
    """Save grouped bars: pooled speedup over AR (mean tau when untimed) of every policy per label
    (``parts`` from :func:`~specpolicy.evaluation.metrics.split_by`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _ in parts]
    policies = [r.policy for r in parts[0][1]]
    timed = all(r.timed for _, results in parts for r in results)
    fig, axes = plt.subplots(figsize=(max(6.0, 2.0 + 0.35 * len(labels) * max(1, len(policies))), 4))
    _grouped_bars(axes, len(labels), [(policy, [_headline(r, timed) for _, results in parts for r in results
                                                 if r.policy == policy]) for policy in policies])
    if timed:
        axes.axhline(1.0, color="0.5", linewidth=1, linestyle="--")
    axes.set_xticks(range(len(labels)))
    axes.set_xticklabels(labels, rotation=30)
    axes.set_xlabel(by)
    axes.set_ylabel(f"pooled speedup over plain AR ({parts[0][1][0].timing})" if timed else "mean tau")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        axes.set_title(title)
    return save_figure(fig, path)


def plot_speedup_map(cells: dict[tuple[str, str, int], float], path: str | Path, title: str = "") -> Path:
    """Save a heat map per policy of pooled speedup over plain AR, prompt groups (rows) x concurrency
    (columns), from ``cells`` {(policy, group, concurrency): speedup}; a cell below AR in red with a ``<``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    policies = list(dict.fromkeys(policy for policy, _, _ in cells))
    groups = sorted({group for _, group, _ in cells}, key=lambda g: (g == "all", label_order(g)))
    concurrencies = sorted({conc for _, _, conc in cells})
    columns = min(len(policies), 3)  # panels wrap in rows of three: a page-wide figure stays readable
    rows = -(-len(policies) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.2 + 1.0 * len(concurrencies) * columns,
                                                     (1.4 + 0.4 * len(groups)) * rows), squeeze=False)
    values = np.array([[[cells.get((p, g, c), np.nan) for c in concurrencies] for g in groups]
                       for p in policies])
    finite = values[np.isfinite(values)]
    norm = TwoSlopeNorm(1.0, min(finite.min(), 0.99), max(finite.max(), 1.01)) if finite.size else None
    for axis in axes.flat[len(policies):]:
        axis.axis("off")
    for k, (axis, policy, grid) in enumerate(zip(axes.flat, policies, values)):
        axis.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            if np.isfinite(value):
                axis.text(j, i, f"{'<' if value < 1 else ''}{value:.2f}", ha="center", va="center",
                          fontsize=9, color="white" if value < 0.5 else "darkred" if value < 1 else "black")
        axis.set_title(policy if len(policy) <= 40 else policy[:39] + "…", fontsize=10)
        axis.set_xticks(range(len(concurrencies)), [str(c) for c in concurrencies], fontsize=9)
        axis.set_yticks(range(len(groups)), groups if k % columns == 0 else [], fontsize=9)
        axis.set_xlabel("concurrency", fontsize=9)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


def check_plot_path(plot: Path) -> None:
    """A --plot path must be a PNG file in a folder that exists or can be made."""
    if plot.is_dir() or plot.suffix.lower() != ".png":
        example = plot / "compare.png" if plot.is_dir() else plot.with_suffix(".png")
        raise ValueError(f"--plot {plot} must be a .png file path (e.g. {example})")
    try:
        plot.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--plot {plot}: cannot create its folder ({error.strerror}); pass a "
                         "writable path") from None
    if not os.access(plot.parent, os.W_OK):
        raise ValueError(f"--plot {plot}: {plot.parent} is not writable; pass a writable path")
