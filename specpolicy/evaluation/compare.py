"""Comparison as a library (no torch, no CLI): a stored sweep's runs for checked ``CompareOptions``, as the
named rows ``specpolicy compare`` prints (``compare_sweep``; docs/real-data.md calls it)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from specpolicy.costs import CostTable, context_bucket
from specpolicy.defaults import COMPARE_BASELINE, COMPARE_ORACLE, DEFAULT_CANDIDATES, DRAFTER_KINDS
from specpolicy.evaluation.compare_options import CompareOptions, Mode
from specpolicy.evaluation.metrics import PolicyResults, SummaryRow, split_by, summarize
from specpolicy.policy import Policy


class Run(NamedTuple):
    """One dataset's results: at a concurrency when served (``None``: one request at a time)."""

    dataset: str
    concurrency: int | None
    results: list[PolicyResults]


@dataclass(frozen=True)
class ComparisonRow:
    """A policy's summary on one dataset, at one concurrency, for one prompt label (``None``: all)."""

    dataset: str
    concurrency: int | None
    label: str | None
    row: SummaryRow

    def to_dict(self, by: str | None = None) -> dict:
        return {"dataset": self.dataset, **({"concurrency": self.concurrency} if self.concurrency else {}),
                **({by: self.label} if by else {}), **self.row.to_dict()}


warn = functools.partial(warnings.warn, category=UserWarning, stacklevel=3)
"""how the library reports a flagged cost table (the command line prints it instead)"""


def price_tables(options: CompareOptions, on_warning: Callable[[str], object] = warn
                 ) -> CostTable | list[CostTable] | None:
    """The ``costs`` tables (one, several by context, or ``None``: the sweep's own), flagged ones reported;
    two at one context length are refused (their order would decide the price)."""
    tables = [CostTable.load(path) for path in options.costs]
    contexts = [t.context_length for t in tables]
    twice = sorted({c for c in contexts if contexts.count(c) > 1})
    if len(tables) > 1 and twice:
        raise ValueError(f"--costs gives {contexts.count(twice[0])} tables measured at context {twice[0]}; "
                         "each table prices the prompts nearest its context: pass one per context length")
    for table, path in zip(tables, options.costs):
        for line in table.flag_warnings(path):
            on_warning(line)
    return tables[0] if len(tables) == 1 else tables or None


def build_policies(options: CompareOptions, candidates: Sequence[int]) -> list[Policy]:
    """The named policies over ``candidates`` (``engine``'s); learned ones choose among ``--candidates``."""
    from specpolicy.registry import get_registry

    registry = get_registry()
    if options.engine:
        from specpolicy.evaluation.engine import engine_sizes, for_engine

        candidates = engine_sizes(candidates)
        return [for_engine(registry.create(name, candidates), candidates) for name in options.policies]
    built = [registry.create(name, candidates) for name in options.policies]
    return [policy.restrict(candidates) for policy in built] if options.candidates else built


def chosen_candidates(options: CompareOptions, store: object | None) -> list[int]:
    """The sizes compared: ``candidates`` (of a stored sweep's), else the sweep's or the default."""
    if store is None:
        return list(options.candidates or DEFAULT_CANDIDATES)
    extra = sorted(set(options.candidates or ()) - set(store.candidates))
    if extra:
        raise ValueError(f"--candidates {extra} are not in the sweep's {list(store.candidates)}; pass a "
                         "subset")
    return list(options.candidates or store.candidates)


class Prepared(NamedTuple):
    """A comparison's checked inputs: tables (``None``: the sweep's), the sweep, sizes and policies."""

    costs: CostTable | list[CostTable] | None
    store: object | None
    candidates: list[int]
    policies: list[Policy]


def prepare(options: CompareOptions, on_warning: Callable[[str], object] = warn) -> Prepared:
    """Load the tables and the stored sweep, build the policies and check them against the sweep, before any
    replay or model work (the one set-up of every comparison, stored or fresh)."""
    from specpolicy.evaluation.replay import check_policies
    from specpolicy.sweep.store import SweepStore

    costs = price_tables(options, on_warning)
    store = SweepStore.load(options.sweep, split=options.split) if options.sweep is not None else None
    for table in [costs] if isinstance(costs, CostTable) else costs or []:
        for line in drafter_mismatch(store, table):
            on_warning(line)
    chosen = chosen_candidates(options, store)
    built = build_policies(options, chosen)
    if store is not None:
        check_policies(built, store, chosen)
    return Prepared(costs, store, chosen, built)


def drafter_mismatch(store: object | None, table: CostTable | object) -> list[str]:
    """A line when ``table`` prices another kind of drafter than the one ``store`` recorded (a chain drafter's
    trace priced as one DFlash pass per block, or the reverse): the verdict would be the pricing's. A sweep of
    specpolicy's own records a block drafter; an import says what it knows (``drafter_kind``)."""
    if store is None:
        return []
    recorded = store.meta.get("drafter_kind") if store.meta.get("mode") == "imported" else "block"
    priced = getattr(table, "drafter", "") or "block"
    if recorded is None or recorded == priced:
        return []
    return [f"the sweep {store.path} records a {recorded} drafter ({DRAFTER_KINDS[recorded]}) but the cost "
            f"table prices a {priced} drafter ({DRAFTER_KINDS[priced]}), so the drafter's cost is not what "
            "it spends: "
            f"pass a {recorded} drafter's table (`specpolicy bench serving-costs --drafter "
            f"{'eagle3' if recorded == 'chain' else 'dflash'}`; shipped: specpolicy/zoo/measured/aic-*)"]


def stored_runs(options: CompareOptions, on_warning: Callable[[str], object] = warn) -> Iterator[Run]:
    """The policies on ``options.sweep`` by exact replay, or served at each concurrency (``batch_costs``)."""
    if options.mode is Mode.live:
        raise ValueError("--sweep evaluates stored results; drop it for --mode live")
    costs, store, chosen, built = prepare(options, on_warning)
    name = Path(options.sweep).name
    if options.batch_costs is not None:
        from specpolicy.evaluation.serving import StoredPrompts, evaluate_serving
        from specpolicy.replay.batch_costs import BatchCostTable

        batch = BatchCostTable.load(options.batch_costs)  # its batches checked with the options
        for line in [*batch.flag_warnings(options.batch_costs), *drafter_mismatch(store, batch)]:
            on_warning(line)
        prompts = StoredPrompts.load(store)
        for concurrency in options.concurrency:
            yield Run(name, concurrency, evaluate_serving(store, built, batch, concurrency, prompts=prompts,
                                                          prefills=not options.decode_only))
        return
    from specpolicy.evaluation.replay import evaluate_replay

    own = store.latency() if costs is None else None
    for line in own.flag_warnings(store.path / "latency.json") if own is not None else []:
        on_warning(line)
    yield Run(name, None, evaluate_replay(store, built, costs=costs, candidates=chosen))


def stored_labels(sweep: str | Path, by: str) -> dict[str, str]:
    """Prompt id -> its ``by`` label in a stored sweep (``context``: the bucket of the prompt's length)."""
    from specpolicy.sweep.store import SweepStore

    records = SweepStore.load(sweep).records()
    if by == "context":
        return {r.prompt_id: context_bucket(r.prompt_length) for r in records}
    return {r.prompt_id: getattr(r, by) or "" for r in records}


def check_labels(labels: dict[str, dict[str, str]], by: str) -> dict[str, dict[str, str]]:
    """``labels`` (dataset -> prompt id -> label), refused where no prompt of a dataset has a ``by`` label."""
    unlabelled = [name for name, found in labels.items() if not any(found.values())]
    if unlabelled:
        raise ValueError(f"--by {by}: no prompt of {', '.join(map(str, unlabelled))} carries a {by} label "
                         "(Spec-Bench and labelled .jsonl files do); drop --by")
    return labels


def comparison_rows(runs: Sequence[Run], labels: dict[str, dict[str, str]], options: CompareOptions
                    ) -> list[ComparisonRow]:
    """Every run summarised (against ``baseline``, with shares of ``oracle``'s gain), per ``by`` label and
    over every prompt when ``by`` is set (``labels``: dataset -> prompt id -> label)."""
    rows = []
    for run in runs:
        parts = split_by(run.results, labels[run.dataset]) if options.by else [(None, run.results)]
        rows += [ComparisonRow(run.dataset, run.concurrency, label, row) for label, part in parts
                 for row in summarize(part, options.baseline, options.oracle)]
    return rows


def compare_sweep(sweep: str | Path, policies: Sequence[str], *, costs: Sequence[str | Path] = (),
                  candidates: Sequence[int] | None = None, split: str | None = None, by: str | None = None,
                  baseline: str = COMPARE_BASELINE, oracle: str = COMPARE_ORACLE,
                  concurrency: Sequence[int] = (1,),
                  batch_costs: str | Path | None = None, decode_only: bool = False) -> list[ComparisonRow]:
    """``specpolicy compare --sweep`` from Python (``costs`` by context, ``batch_costs`` and ``concurrency``
    to serve, ``decode_only``: no prefills, ``by``: rows per label); flagged tables: warnings.warn."""
    if not isinstance(sweep, str | Path):
        raise ValueError(f"sweep must be a sweep store's folder (a str or Path), got {sweep!r}")
    listed = isinstance(costs, Sequence) and not isinstance(costs, str)  # a bare path is refused, not split
    options = CompareOptions(policies, sweep=Path(sweep), costs=tuple(map(Path, costs)) if listed else costs,
                             candidates=candidates, split=split, by=by,
                             baseline=baseline, oracle=oracle, concurrency=concurrency,
                             batch_costs=Path(batch_costs) if batch_costs else None, decode_only=decode_only)
    options.validate()
    labels = check_labels({options.sweep.name: stored_labels(sweep, by)}, by) if by else {}
    return comparison_rows(list(stored_runs(options)), labels, options)
