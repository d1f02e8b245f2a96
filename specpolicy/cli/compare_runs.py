"""The runs of ``specpolicy compare`` that need models or a server: a sweep of its own per dataset (cached by
settings), live decoding, or an engine. Options and stored sweeps: :mod:`specpolicy.evaluation.compare`."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from rich.markup import escape

from specpolicy.cli.common import settings_from, stderr, warn_line
from specpolicy.defaults import MAX_PROMPT_TOKENS, cache_dir
from specpolicy.evaluation.compare import Run, prepare, stored_labels, stored_runs
from specpolicy.evaluation.compare_options import CompareOptions, Mode


def results_per_dataset(options: CompareOptions) -> Iterator[Run]:
    """Each dataset's results (per concurrency when served); all that is checkable is checked first."""
    if options.sweep is not None and not options.engine:
        yield from stored_runs(options, warn_line)
        return
    from specpolicy.evaluation.replay import check_candidates

    costs, store, chosen, built = prepare(options, warn_line)
    if options.mode is Mode.live:
        from specpolicy.decoding.engine import check_live

        check_live(built, "use --mode replay")
    if store is None:
        from specpolicy.checks import check_vocabulary
        from specpolicy.models.sources import target_vocab_size

        check_vocabulary(built, target_vocab_size(options.target), f"target {options.target!r}")
        # a fresh sweep or live decoding runs whatever sizes the policies choose
        if options.candidates is None:
            chosen = sorted({*chosen, *(b for policy in built for b in policy.choices())})
        for policy in built:
            check_candidates(policy, chosen, given=True)
    if options.engine:
        from specpolicy.engines.build import find_server

        find_server(options.server)  # before any model loads
    for name in [options.sweep.name] if store is not None else options.datasets:
        if options.engine:
            from specpolicy.cli.engine import engine_results

            sweep = store or _cached_sweep(name, options, chosen)
            yield Run(name, None, engine_results(sweep, built, options.threads, options.server,
                                                 options.target, options.drafter, options.steps))
        else:
            yield Run(name, None, _run_dataset(name, options, built, chosen, costs))


@functools.cache
def _load_pair_once(target: str, drafter: str, dtype: str, device: str):
    """The model pair, loaded once per process however many datasets a live compare walks."""
    from specpolicy.models import load_pair

    return load_pair(target, drafter, dtype, device)


def _run_dataset(name: str, options: CompareOptions, policies, candidates: list[int], costs):
    from specpolicy.evaluation.replay import evaluate_replay

    if options.mode is Mode.live:
        from specpolicy.cli.progress import progress_bar
        from specpolicy.data.prompts import encode_prompt
        from specpolicy.data.registry import load_prompts
        from specpolicy.decoding import SpeculativeDecoder
        from specpolicy.decoding.autoregressive import own_answer
        from specpolicy.evaluation.live import evaluate_live
        from specpolicy.sweep.latency import cached_costs, pin_threads

        pin_threads(options.threads)  # only where models run: replay needs no torch
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
    instead = headline_costs(store, options) if costs is None else None
    results = evaluate_replay(store, policies, costs=instead[0] if instead else costs, candidates=candidates)
    for result in results if instead else []:
        result.timing = f"modelled ({instead[1]})"
    return results


def headline_costs(store, options: CompareOptions):
    """(table, label) the main job prices with when its sweep's measured table is flagged (dropped from the
    cache, the user told, the shipped quiet table used for the shipped pair), or ``None`` when it is fine."""
    from specpolicy.costs import CostTable
    from specpolicy.defaults import SWEEPS_DIR
    table = store.latency()
    problems = table.check() if table is not None else []
    if not problems:
        return None
    (store.path / "latency.json").unlink()  # never cached: a rerun on a quieter machine measures again
    zoo_pair = options.target == options.drafter == "tiny" and options.device == "cpu"  # the twin costs more
    file = SWEEPS_DIR / "sharegpt" / "latency.json"
    shipped = CostTable.load(file) if zoo_pair else None
    used = (f"priced with the shipped table of the tiny pair ({file}, measured on a quiet {shipped.machine})"
            if shipped else "priced with it for this run only")
    stderr.print(f"[yellow]warning:[/] this machine was too noisy to measure its cost table "
                 f"({escape('; '.join(problems))}); {escape(used)}. Measure again on a quiet machine: "
                 "`specpolicy bench latency --out costs.json`, then --costs costs.json", soft_wrap=True,
                 highlight=False)
    return (shipped, "shipped table") if shipped else (table, "flagged table")


def _cached_sweep(name: str, options: CompareOptions, candidates: list[int]):
    """compare's own replay sweep of a dataset, cached by its settings and weights (resumable)."""
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.registry import load_prompts
    from specpolicy.models.sources import weights_fingerprint
    from specpolicy.sweep.resume import StoreUnusableError
    from specpolicy.sweep.settings import SweepSettings

    prompts = load_prompts(name, options.max_samples, options.seed)
    settings = settings_from(SweepSettings, vars(options), dataset=name, candidates=candidates, mode="replay")
    settings.validate()
    weights = [weights_fingerprint(options.target, "target"), weights_fingerprint(options.drafter, "drafter")]
    identity = {**settings.meta(), "threads": options.threads, "weights": weights}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    out = cache_dir() / "sweeps" / f"{Path(name).stem}-{key}"
    cached = _complete(out, prompts)
    if cached is not None:  # read back with no model loaded (and no write lock: the cache may be read-only)
        return cached
    from specpolicy.models.loading import resolve_device, resolve_dtype
    from specpolicy.sweep.run import run_sweep  # torch: only where the sweep runs

    resolve_dtype(options.dtype, resolve_device(options.device))  # refused before the sweep starts
    stderr.print(f"sweeping {name} into compare's cache (resumable): {out}", highlight=False, soft_wrap=True)
    with progress_bar(f"sweep {Path(name).name}", len(prompts)) as update:
        try:
            store = run_sweep(settings, str(out), prompts, on_progress=update, wait=lambda path: stderr.print(
                "waiting for another run sweeping into the same cache (it finishes the prompts this run "
                "needs)",
                highlight=False))
        except StoreUnusableError as error:
            raise ValueError(f"{error}. That store is compare's cache, which takes no --out: "
                             f"delete {out} and rerun to sweep anew") from None
    return store


def _complete(out: Path, prompts):
    """Compare's cached sweep at ``out`` if it holds every one of ``prompts`` and its table, else ``None``."""
    from specpolicy.sweep.store import SweepStore

    if not (out / "meta.json").is_file() or not (out / "latency.json").is_file():
        return None
    try:
        store = SweepStore.load(out)
        return store if {p.id for p in prompts} <= store.done_ids() else None
    except ValueError:  # a damaged store: the sweep names it, with the fix
        return None


def prompt_labels(options: CompareOptions, name: str) -> dict[str, str]:
    """Prompt id -> its ``--by`` label: from the sweep's records, or from the dataset's prompts."""
    if options.sweep is not None:
        return stored_labels(options.sweep, options.by)
    from specpolicy.data.registry import load_prompts

    return {p.id: getattr(p, options.by) for p in load_prompts(name, options.max_samples, options.seed)}
