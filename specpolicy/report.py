"""Plots of a comparison: pooled speedup (or tau) per policy and the distribution of chosen block sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from specpolicy.metrics import PolicyResults


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
    """Save a two-panel figure: pooled speedup over AR per policy (mean tau when untimed); histogram of
    the block sizes of all cycles per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r.policy for r in results]
    timed = all(r.timed for r in results)
    if timed:
        values = [r.column("ar_seconds").sum() / r.column("seconds").sum() for r in results]
        left.axhline(1.0, color="0.5", linewidth=1, linestyle="--")
        left.set_ylabel(f"pooled speedup over plain AR ({results[0].timing})")
        left.set_title("speed per policy")
    else:
        values = [r.taus().mean() for r in results]
        left.set_ylabel("mean tau (accepted + 1 per cycle)")
        left.set_title("tau per policy")
    left.bar(names, values, color="#4c72b0")
    left.tick_params(axis="x", rotation=30)
    sizes = sorted({b for r in results for p in r.prompts for b in p.block_sizes})
    width = 0.8 / max(1, len(results))
    for i, result in enumerate(results):
        counts = Counter(b for p in result.prompts for b in p.block_sizes)
        total = max(1, sum(counts.values()))
        right.bar([k + (i - len(results) / 2) * width + width / 2 for k in range(len(sizes))],
                  [counts[s] / total for s in sizes], width=width, label=result.policy)
    right.set_xticks(range(len(sizes)))
    right.set_xticklabels([str(b) for b in sizes])
    right.set_xlabel("block size")
    right.set_ylabel("share of cycles")
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
