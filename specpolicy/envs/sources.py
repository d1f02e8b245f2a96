"""Where an environment's episodes come from: a replay sweep or live decoding, behind one interface.

Both sources (:class:`~specpolicy.envs.replay_data.ReplayData`, :class:`~specpolicy.envs.live.LiveSource`)
start an :class:`Episode` (a prompt's prefilled decode, stepped one cycle at a time) and price a whole
prompt decoded at one block size (:meth:`outcome`), so the environments never ask which one they hold.
"""

from __future__ import annotations

from pathlib import Path

from specpolicy.defaults import COST_WEIGHT
from specpolicy.envs.episode import Episode

__all__ = ["Episode", "open_source"]


def open_source(backend: str, sweep: str | Path | None = None, split: str | None = None, live: dict | None = None,
                features: str = "logits", reward: str = "tau", cost_weight: float = COST_WEIGHT):
    """The source of ``backend`` (checked by :func:`~specpolicy.envs.rewards.check_reward` first):
    ``replay`` reads ``sweep`` (default: the zoo's shipped sweep of ``split``); ``live`` decodes the prompts
    of ``live`` (keywords of :class:`~specpolicy.envs.live.LiveSource`). ``features``, ``reward`` and
    ``cost_weight`` are what :meth:`Episode.observation` and a per-prompt outcome report."""
    if backend == "live":  # loads the model stack only when asked for
        from specpolicy.envs.live import LiveSource

        return LiveSource(**(live or {}), features=features, reward=reward, cost_weight=cost_weight)
    from specpolicy.envs.replay_data import ReplayData

    return ReplayData.load(sweep, features, reward, cost_weight, split)
