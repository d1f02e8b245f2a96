"""Lockstep replay: many prompts' decodes, and many settings of one rule, stepped together with the rule's
state in numpy arrays [lanes]; every lane runs the cycles the per-prompt walk (ReplayTable.simulate) runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, NamedTuple

import numpy as np

from specpolicy.costs import CostTable
from specpolicy.replay.schedules import padded_outcomes
from specpolicy.replay.table import ReplayTable


class Lanes(NamedTuple):
    """What each lane (a setting on a prompt) ran: its cycles' modelled seconds, the tokens they commit and
    their count, [3, lanes]; ``block_sizes[lane]``: B of every cycle."""

    totals: np.ndarray
    block_sizes: list[np.ndarray]


def _stacked(values: list, setting: np.ndarray) -> np.ndarray:
    """A parameter's values over settings at every lane's ``setting`` [lanes] (tuples, which the rules read as
    sets or by block, padded with their last value: [lanes, T, ...])."""
    if isinstance(values[0], tuple):
        values = [v + v[-1:] * (max(map(len, values)) - len(v)) for v in values]
    return np.array(values)[setting]


def _rule(like: Any, value: Callable[[str], Any]) -> Any:
    """A rule of ``like``'s class holding ``value(field)`` of every field but a ``shared`` one, ``like``'s
    (arrays over lanes, which its checks would refuse)."""
    rule = object.__new__(type(like))
    vars(rule).update({f.name: getattr(like, f.name) if f.metadata.get("shared") else value(f.name)
                       for f in fields(like)})
    return rule


def lockstep(tables: Sequence[ReplayTable], settings: Sequence[Any], lanes: tuple[np.ndarray, np.ndarray],
             costs: CostTable | None = None, batch: int = 1) -> Lanes:
    """``settings`` (array rules of one class: ``start``, ``block``, ``update`` over lanes; a field marked
    ``shared`` is every lane's) run on ``tables``, ``lanes``: (table, setting) of each lane [lanes]; priced by
    ``costs`` (its seconds what a rule that ``reads_time`` reads)."""
    verifying = int(np.max(getattr(settings[0], "verify_block", 0)))
    shapes = [(verifying, length) for length in range(1, verifying + 1)] if verifying else [
        (b, b) for b in sorted(set().union(*(s.choices() for s in settings)))]
    column = np.zeros((max(shapes)[0] + 1,) * 2, dtype=np.int64)
    column[tuple(np.transpose(shapes))] = np.arange(len(shapes))
    accepted, kept, following, done, _ = padded_outcomes(tables, shapes)
    priced = np.array([costs.split_cycle_seconds(b, length) if costs else 0.0 for b, length in shapes])
    table_of, setting = lanes
    rule = _rule(settings[0], lambda name: _stacked([getattr(s, name) for s in settings], setting))
    lane = np.arange(len(setting))
    totals, anchor, log = np.zeros((3, len(lane))), np.zeros(len(lane), np.int64), []
    state = rule.start(np.array([t.prompt_length for t in tables])[table_of])
    ended = np.array([t.start()[2] for t in tables])[table_of]
    while True:
        if ended.any():  # the lanes whose decode ended leave every array
            for name, value in vars(state).items():
                setattr(state, name, value[~ended])
            rule = _rule(rule, lambda name, rule=rule, kept=~ended: getattr(rule, name)[kept])
            lane, anchor = lane[~ended], anchor[~ended]
        if not lane.size:
            break
        prompt, length = table_of[lane], np.asarray(rule.block(state, batch))  # a verify rule's: L of its B
        size = length * 0 + verifying if verifying else length
        k = column[size, length]
        drafts, commits, cost = accepted[prompt, anchor, k], kept[prompt, anchor, k], priced[k]
        if (drafts < 0).any():  # raises, naming the anchor, as the walk does
            j = int(np.argmax(drafts < 0))
            tables[prompt[j]].cycle(tables[prompt[j]].prompt_length + int(anchor[j]), 1, int(size[j]),
                                    int(length[j]))
        totals[:, lane] += [np.where(commits > 0, cost, 0.0), commits, commits > 0]
        log.append((lane[commits > 0], size[commits > 0]))
        rule.update(state, length, drafts, cost if rule.reads_time else 0.0 * cost, size)
        ended, anchor = done[prompt, anchor, k], following[prompt, anchor, k]
    order = np.concatenate([[0], np.cumsum(totals[2]).astype(np.int64)])
    by_lane = np.concatenate([size for _, size in log])[np.argsort(np.concatenate([ln for ln, _ in log]),
                                                                   kind="stable")] if log else np.zeros(0)
    return Lanes(totals, [by_lane[order[i]:order[i + 1]] for i in range(totals.shape[1])])
