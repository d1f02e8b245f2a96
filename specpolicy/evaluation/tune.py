"""``specpolicy tune RULE``: a field controller's settings (a grid, or seeded draws from it) replayed on the
training side of a sweep's split; the best held out against the rule's defaults and the best fixed block with
paired intervals, and written in the engine's own terms."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specpolicy.evaluation.compare import compare_sweep
from specpolicy.evaluation.metrics import SummaryRow
from specpolicy.registry import create_policy


@dataclass(frozen=True)
class Tuned:
    """A tuning's outcome: the best ``setting`` of those ``tried`` on the training side, and the held-out rows
    (the setting, the rule at its defaults, the best fixed block), their ratios against the defaults."""

    rule: str
    setting: str
    tried: int
    train_speedup: float
    train_defaults: float
    held_out: tuple[SummaryRow, ...]
    terms: str


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``["window_size=2,4,8", "steps=1/3/7,1/5"]`` -> each parameter's values (tuples joined by '/')."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, _, values = (part.strip() for part in item.partition("="))
        if not name or not values or name in grid:
            raise ValueError("--grid takes NAME=V1,V2,... once per parameter, such as window_size=2,4,8; "
                             f"got {item!r}")
        grid[name] = [v.strip() for v in values.split(",") if v.strip()]
        if twice := next((v for i, v in enumerate(grid[name]) if v in grid[name][:i]), None):
            raise ValueError(f"--grid names {name}={twice} twice; name each value once")
    return grid


def settings(rule: str, grid: Mapping[str, Sequence[str]], draws: int | None = None, seed: int = 0
             ) -> list[str]:
    """The grid's settings as policy names (``draws`` of them, by ``seed``), each built once to check it."""
    if not grid:
        raise ValueError("tune needs a --grid of at least one parameter, such as --grid window_size=2,4,8")
    if seed and draws is None:
        raise ValueError("--seed draws the --draws settings of the grid: add --draws N, or drop --seed")
    if ":" in rule:
        raise ValueError(f"tune takes a rule's name ({rule.partition(':')[0]}); give its parameters in "
                         "--grid")
    names = [f"{rule}:" + ",".join(f"{key}={value}" for key, value in zip(grid, combo))
             for combo in itertools.product(*grid.values())]
    if draws is not None and draws < len(names):
        names = random.Random(seed).sample(names, draws)
    for name in [rule, *names]:
        if create_policy(name, (1,)).engine_terms() is None:
            raise ValueError(f"{rule} is not a field controller or llamacpp-pmin; `specpolicy policies` "
                             "lists them (dflash-mlx, sglang-adaptive, mistralrs-autotune, ...)")
    return names


def tune(sweep: str | Path, rule: str, names: Sequence[str], *, costs: Sequence[str | Path] = (),
         fixed: Sequence[int] | None = None) -> Tuned:
    """Replay ``names`` and the rule's defaults on the training side of ``sweep``, then the best of them, the
    defaults and the best fixed block (of ``fixed``, default the sweep's sizes) on its validation side."""
    from specpolicy.sweep.store import SweepStore

    sizes = list(fixed or SweepStore.load(sweep).candidates)
    blocks = [f"fixed{b}" for b in sizes]
    train = {r.row.policy: r.row for r in compare_sweep(sweep, [rule, *names, *blocks], costs=costs,
                                                        candidates=sizes, split="train", baseline=rule)}
    best = max([rule, *names], key=lambda name: train[name].speedup)
    best_fixed = max(blocks, key=lambda name: train[name].speedup)
    held = compare_sweep(sweep, list(dict.fromkeys([best, rule, best_fixed])), costs=costs, candidates=sizes,
                         split="validation", baseline=rule)
    return Tuned(rule, best, len(names), train[best].speedup, train[rule].speedup,
                 tuple(r.row for r in held), create_policy(best, sizes).engine_terms())
