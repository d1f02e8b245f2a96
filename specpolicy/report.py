"""Plots of a comparison: tau per policy and the distribution of chosen block sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from specpolicy.evaluate import PolicyResults


def _save(fig, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (folders created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_comparison(results: Sequence[PolicyResults], path: str | Path, title: str = "") -> Path:
    """Save a two-panel figure: mean tau per policy; histogram of first-cycle block sizes per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r.policy for r in results]
    taus = [r.taus().mean() for r in results]
    left.bar(names, taus, color="#4c72b0")
    low = min(taus) if taus else 0
    left.set_ylim(max(0.0, low - 0.2 * (max(taus) - low + 0.1)), max(taus) * 1.02 if taus else 1)
    left.set_ylabel("mean tau (accepted + 1 per cycle)")
    left.set_title("tau per policy")
    left.tick_params(axis="x", rotation=30)
    sizes = sorted({p.chosen for r in results for p in r.prompts})
    width = 0.8 / max(1, len(results))
    for i, result in enumerate(results):
        counts = Counter(p.chosen for p in result.prompts)
        total = max(1, len(result.prompts))
        right.bar([s + (i - len(results) / 2) * width + width / 2 for s in sizes],
                  [counts[s] / total for s in sizes], width=width, label=result.policy)
    right.set_xticks(sizes)
    right.set_xlabel("block size chosen (first cycle)")
    right.set_ylabel("share of prompts")
    right.set_title("chosen block sizes")
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_tau_per_block_size(store, path: str | Path, max_lines: int = 40) -> Path:
    """tau against block size: one grey line per prompt (first ``max_lines``) and the mean in black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(store.candidates)
    records = list(store.records())
    taus = store.tau_matrix(records)
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in taus[:max_lines]:
        ax.plot(sizes, row, color="0.7", linewidth=0.8)
    ax.plot(sizes, taus.mean(axis=0), color="black", linewidth=2.5, marker="o", label="mean over prompts")
    ax.set_xlabel("block size B")
    ax.set_ylabel("tau")
    ax.set_xticks(sizes)
    ax.legend()
    return _save(fig, path)
