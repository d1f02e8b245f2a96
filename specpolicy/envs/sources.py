"""Where episodes come from, behind one interface: :class:`~specpolicy.envs.replay_data.ReplayData` or
:class:`~specpolicy.envs.live.LiveSource` start an :class:`Episode`, price a prompt at a B (``outcome``)."""

from __future__ import annotations

from pathlib import Path

from specpolicy.defaults import COST_WEIGHT
from specpolicy.envs.episode import Episode

__all__ = ["Episode", "open_source"]


def open_source(backend: str, sweep: str | Path | None = None, split: str | None = None,
                live: dict | None = None,
                features: str = "logits", reward: str = "tau", cost_weight: float = COST_WEIGHT):
    """The source of ``backend`` (checked by :func:`~specpolicy.envs.rewards.check_reward`): ``replay`` reads
    ``sweep`` (default: the zoo's), ``live`` decodes (:class:`~specpolicy.envs.live.LiveSource`)."""
    if backend == "live" and (sweep is not None or split is not None):
        raise ValueError("sweep= and split= pick a stored sweep's prompts (backend='replay'); the live "
                         "backend decodes its own (live={'dataset': ...}): drop them, or use "
                         "backend='replay'")
    if backend != "live" and live is not None:
        raise ValueError("live= configures the live backend's decoding; pass backend='live' with it, or drop "
                         "it to replay a stored sweep")
    if backend == "live":  # loads the model stack only when asked for
        from specpolicy.envs.live import LiveSource

        return LiveSource(**(live or {}), features=features, reward=reward, cost_weight=cost_weight)
    from specpolicy.envs.replay_data import ReplayData

    return ReplayData.load(sweep, features, reward, cost_weight, split)
