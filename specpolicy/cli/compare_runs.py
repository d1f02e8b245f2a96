"""What ``specpolicy compare`` evaluates: its options, checked before any model loads, and the runs that
produce each dataset's results (a stored sweep, a sweep of its own cached by settings, or live decoding)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from rich.markup import escape

from specpolicy.cli.common import settings_from, stderr
from specpolicy.cycles import check_temperature
from specpolicy.defaults import COMPARE_BASELINE, COMPARE_ORACLE, MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, cache_dir

DEFAULT_DATASET = "sharegpt"
DEFAULT_SAMPLES = 48
BY = ("category", "group", "context")
"""the prompt labels ``--by`` reports per (a sweep record's, or a prompt's from its dataset; ``context``: the
bucket of a stored prompt's length, :func:`~specpolicy.costs.context_bucket`)"""


class Mode(str, Enum):
    replay = "replay"
    live = "live"


@dataclass
class CompareOptions:
    """Everything ``compare`` was asked for, checked before any model loads."""

    policies: list[str]
    datasets: list[str]
    mode: Mode
    sweep: Path | None
    candidates: list[int] | None
    temperature: float
    max_samples: int
    max_new_tokens: int
    seed: int
    baseline: str
    costs: tuple[Path, ...]
    """cost tables replay prices with: one, or several measured at different context lengths"""
    threads: int
    target: str
    drafter: str
    device: str
    dtype: str
    plot: Path | None = None
    oracle: str = COMPARE_ORACLE
    concurrency: tuple[int, ...] = (1,)
    """requests served together: one value, or several (a map over concurrencies)"""
    batch_costs: Path | None = None
    split: str | None = None
    allow_noisy: bool = False
    by: str | None = None
    engine: str | None = None
    """a serving engine the policies run in (``llamacpp``), measured there"""
    server: str | None = None

    def validate(self) -> None:
        """Fail on options that cannot work together, before anything loads."""
        check_temperature(self.temperature, "--temperature")
        twice = sorted({name for name in self.policies if self.policies.count(name) > 1})
        if twice:
            raise ValueError(f"--policies names {', '.join(twice)} twice; name each policy once")
        for option, name, default in (("--baseline", self.baseline, COMPARE_BASELINE),
                                      ("--oracle", self.oracle, COMPARE_ORACLE)):
            if name != default and name not in self.policies:  # the defaults may be left out of --policies
                raise ValueError(f"{option} {name} is not among --policies ({','.join(self.policies)}); add it "
                                 "there, or name one of those")
        if self.engine not in (None, "llamacpp"):
            raise ValueError(f"--engine {self.engine} is not an engine specpolicy drives; use --engine llamacpp")
        if self.engine and (self.mode is Mode.live or self.batch_costs is not None or self.costs):
            raise ValueError("--engine measures the engine and prices replay with the engine's own cost table; drop "
                             "--mode live, --costs and --batch-costs")
        if self.by not in (None, *BY):
            raise ValueError(f"--by {self.by} is not a prompt label; use --by category, group or context")
        if self.by == "context" and self.sweep is None:
            raise ValueError("--by context reads each stored prompt's length: pass --sweep DIR")
        if len(self.costs) > 1 and self.mode is Mode.live:
            raise ValueError("several --costs tables price replay by each prompt's context; live decoding reads one "
                             "table: pass one")
        if self.sweep is not None:
            sweep_settings = (("--dataset", self.datasets != [DEFAULT_DATASET]),
                              ("--temperature", self.temperature != 0.0),
                              ("--max-samples", self.max_samples != DEFAULT_SAMPLES),
                              ("--max-new-tokens", self.max_new_tokens != MAX_NEW_TOKENS), ("--seed", self.seed != 0),
                              ("--target", self.target != "tiny"), ("--drafter", self.drafter != "tiny"),
                              ("--device", self.device != "cpu"), ("--dtype", self.dtype != "auto"))
            ignored = [flag for flag, given in sweep_settings if given]
            if ignored:
                raise ValueError(f"--sweep evaluates a stored sweep with its own prompts and settings; "
                                 f"{', '.join(ignored)} would be ignored: drop them, or drop --sweep to sweep anew")
        elif self.split is not None:
            raise ValueError("--split picks one side of a --sweep store (train or validation, by "
                             "conversation and input, as `specpolicy train` splits it); pass --sweep DIR")
        if self.plot is not None:
            check_plot_path(self.plot)
        if self.allow_noisy and self.batch_costs is None:
            raise ValueError("--allow-noisy lets a flagged --batch-costs table through; without --batch-costs it "
                             "does nothing: drop it (a flagged --costs table is used with a warning)")
        if self.batch_costs is not None and self.costs:
            raise ValueError("--costs prices one request at a time and serving prices every step with --batch-costs; "
                             "drop --costs (the batch table gives each concurrency's per-request costs)")
        if (max(self.concurrency) > 1 or self.batch_costs is not None) and \
                (self.sweep is None or self.batch_costs is None):
            raise ValueError("--concurrency N simulates serving from a stored sweep: pass --sweep DIR and "
                             "--batch-costs FILE (from `specpolicy bench batch-latency --out FILE`)")


def check_plot_path(plot: Path) -> None:
    """A --plot path must be a PNG file in a folder that exists or can be made."""
    if plot.is_dir() or plot.suffix.lower() != ".png":
        example = plot / "compare.png" if plot.is_dir() else plot.with_suffix(".png")
        raise ValueError(f"--plot {plot} must be a .png file path (e.g. {example})")
    try:
        plot.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--plot {plot}: cannot create its folder ({error.strerror}); pass a writable path") from None
    if not os.access(plot.parent, os.W_OK):
        raise ValueError(f"--plot {plot}: {plot.parent} is not writable; pass a writable path")


def results_per_dataset(options: CompareOptions):
    """(dataset name, concurrency served at or ``None``, results) per dataset and concurrency; everything
    checkable is checked before any model loads."""
    from specpolicy.costs import CostTable
    from specpolicy.defaults import DEFAULT_CANDIDATES
    from specpolicy.evaluation.replay import check_candidates, check_policies
    from specpolicy.policy import check_vocabulary
    from specpolicy.registry import get_registry
    from specpolicy.sweep.store import SweepStore

    tables = [CostTable.load(path) for path in options.costs]
    for table, path in zip(tables, options.costs):
        warn_if_flagged(table, path)  # in every mode; a sweep's own table is checked where it is read
    costs = tables[0] if len(tables) == 1 else tables or None
    store = None
    if options.sweep is not None:
        if options.mode is Mode.live:
            raise ValueError("--sweep evaluates stored results; drop it for --mode live")
        store = SweepStore.load(options.sweep, split=options.split)
        chosen = options.candidates or list(store.candidates)
        extra = sorted(set(chosen) - set(store.candidates))
        if extra:
            raise ValueError(f"--candidates {extra} are not in the sweep's {list(store.candidates)}; pass a subset")
    else:
        chosen = options.candidates or list(DEFAULT_CANDIDATES)
    registry = get_registry()
    if options.engine:  # the sizes llama.cpp runs; a learned policy chooses among them
        from specpolicy.evaluation.engine import engine_sizes, for_engine

        chosen = engine_sizes(chosen)
        built = [for_engine(registry.create(name, chosen), chosen) for name in options.policies]
    else:
        built = [registry.create(name, chosen) for name in options.policies]
    if options.mode is Mode.live:
        from specpolicy.decoding.engine import check_live

        check_live(built)
    if store is not None:
        check_policies(built, store, chosen)
    else:
        from specpolicy.models.loading import target_vocab_size

        check_vocabulary(built, target_vocab_size(options.target), f"target {options.target!r}")
        for policy in built:
            check_candidates(policy, chosen)
    if options.baseline not in options.policies:
        stderr.print(f"note: baseline {options.baseline} is not among the policies; no ratios or gain shares")
    elif options.oracle not in options.policies:
        stderr.print(f"note: {options.oracle} is not among the policies; no gain shares")
    if store is not None and options.batch_costs is not None:
        from specpolicy.evaluation.serving import StoredPrompts, evaluate_serving
        from specpolicy.replay.batch_costs import BatchCostTable

        batch = BatchCostTable.load(options.batch_costs, allow_noisy=options.allow_noisy)
        prompts = StoredPrompts.load(store)
        for concurrency in options.concurrency:
            yield options.sweep.name, concurrency, evaluate_serving(store, built, batch, concurrency, prompts=prompts)
        return
    if options.engine:
        from specpolicy.cli.engine import engine_results

        if store is None:
            from specpolicy.sweep.latency import pin_threads

            pin_threads(options.threads)
        for name in [options.sweep.name] if store is not None else options.datasets:
            engine_store = store or _cached_sweep(name, options, chosen)
            yield name, None, engine_results(engine_store, built, options.threads, options.server, options.target,
                                             options.drafter)
        return
    if store is not None:
        from specpolicy.evaluation.replay import evaluate_replay

        if costs is None:
            warn_if_flagged(store.latency(), store.path / "latency.json")
        yield options.sweep.name, None, evaluate_replay(store, built, costs=costs, candidates=chosen)
        return
    from specpolicy.sweep.latency import pin_threads

    pin_threads(options.threads)  # only where models run: a stored sweep's replay needs no torch
    for name in options.datasets:
        yield name, None, _run_dataset(name, options, built, chosen, costs)


@functools.cache
def _load_pair_once(target: str, drafter: str, dtype: str, device: str):
    """The model pair, loaded once per process however many datasets a live compare walks."""
    from specpolicy.models import load_pair

    return load_pair(target, drafter, dtype, device)


def _run_dataset(name: str, options: CompareOptions, policies, candidates: list[int], costs):
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.registry import load_prompts
    from specpolicy.evaluation.live import evaluate_live
    from specpolicy.evaluation.replay import evaluate_replay

    if options.mode is Mode.live:
        from specpolicy.data.prompts import encode_prompt
        from specpolicy.decoding import SpeculativeDecoder
        from specpolicy.decoding.autoregressive import own_answer
        from specpolicy.sweep.latency import cached_costs

        prompts = load_prompts(name, options.max_samples, options.seed)

        pair = _load_pair_once(options.target, options.drafter, options.dtype, options.device)
        decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=options.temperature,
                                     max_new_tokens=options.max_new_tokens)
        if costs is None:
            costs = cached_costs(decoder, candidates, pair.metadata(), report=stderr.print)
        answer = own_answer(decoder)  # multi-turn prompts continue after the target's answers (untimed)
        encoded = [(p.id, encode_prompt(pair.tokenizer, p, MAX_PROMPT_TOKENS, answer)) for p in prompts]
        with progress_bar(f"live {name}", len(encoded)) as update:
            return evaluate_live(decoder, encoded, policies, options.seed, on_progress=update, costs=costs)
    store = _cached_sweep(name, options, candidates)
    if costs is None:
        warn_if_flagged(store.latency(), store.path / "latency.json")
    return evaluate_replay(store, policies, costs=costs, candidates=candidates)


def _cached_sweep(name: str, options: CompareOptions, candidates: list[int]):
    """compare's own replay sweep of a dataset, cached by its settings and weights (resumable)."""
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.registry import load_prompts
    from specpolicy.models.loading import weights_fingerprint
    from specpolicy.sweep.resume import StoreUnusableError
    from specpolicy.sweep.run import SweepSettings, run_sweep

    prompts = load_prompts(name, options.max_samples, options.seed)
    settings = settings_from(SweepSettings, vars(options), dataset=name, candidates=candidates, mode="replay")
    settings.validate()
    weights = [weights_fingerprint(options.target, "target"), weights_fingerprint(options.drafter, "drafter")]
    identity = {**settings.meta(), "threads": options.threads, "weights": weights}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    out = cache_dir() / "sweeps" / f"{Path(name).stem}-{key}"
    stderr.print(f"sweeping {name} into compare's cache (resumable): {out}", highlight=False, soft_wrap=True)
    with progress_bar(f"sweep {Path(name).name}", len(prompts)) as update:
        try:
            store = run_sweep(settings, str(out), prompts, on_progress=update, wait=lambda path: stderr.print(
                "waiting for another run sweeping into the same cache (it finishes the prompts this run needs)",
                highlight=False))
        except StoreUnusableError as error:
            raise ValueError(f"{error}. That store is compare's cache, which takes no --out: delete {out} and rerun "
                             "to sweep anew") from None
    return store


def warn_if_flagged(costs, where: Path) -> None:
    """Say on stderr when the table time is priced with is untrustworthy (:meth:`CostTable.flag_warnings`)."""
    for line in costs.flag_warnings(where) if costs is not None else []:
        stderr.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True, highlight=False)


def prompt_labels(options: CompareOptions, name: str) -> dict[str, str]:
    """Prompt id -> its ``--by`` label: from the sweep's records, or from the dataset's prompts."""
    if options.sweep is not None:
        from specpolicy.costs import context_bucket
        from specpolicy.sweep.store import SweepStore

        records = SweepStore.load(options.sweep).records()
        if options.by == "context":
            return {r.prompt_id: context_bucket(r.prompt_length) for r in records}
        return {r.prompt_id: getattr(r, options.by) or "" for r in records}
    from specpolicy.data.registry import load_prompts

    return {p.id: getattr(p, options.by) for p in load_prompts(name, options.max_samples, options.seed)}
