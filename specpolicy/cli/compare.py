"""``specpolicy compare --policies fixed16,blockpilot,oracle``: the main job."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import typer

from specpolicy.cli.common import (
    DeviceOption,
    DrafterOption,
    DtypeOption,
    OutputFormat,
    TargetOption,
    emit,
    fail,
    stderr,
)
from specpolicy.cli.sweep import parse_candidates


def cache_dir() -> Path:
    """Where compare keeps the sweeps it runs (``SPECPOLICY_CACHE``, default ``~/.cache/specpolicy``)."""
    return Path(os.environ.get("SPECPOLICY_CACHE", Path.home() / ".cache" / "specpolicy")).expanduser()


def compare(
    policies: str = typer.Option("fixed16,blockpilot,oracle", help="comma-separated policy names"),
    dataset: str = typer.Option("sharegpt", help="prompt sets (comma-separated) or .jsonl/.txt files"),
    mode: str = typer.Option("replay", help="replay (exact, from a sweep store) or live (decode with each policy)"),
    sweep: Path = typer.Option(None, help="evaluate this existing sweep store instead of sweeping"),
    temperature: float = typer.Option(0.0, min=0.0),
    candidates: str = typer.Option(None, help="block sizes (default: the sweep's, or 14,15,16,17,18)"),
    max_samples: int = typer.Option(48, min=1, help="prompts per dataset (seeded shuffle)"),
    max_new_tokens: int = typer.Option(128, min=2),
    seed: int = typer.Option(0),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table, json, csv or markdown"),
    plot: Path = typer.Option(None, help="save a PNG: tau per policy and chosen block sizes"),
    bootstrap: int = typer.Option(2000, min=100, help="bootstrap resamples for the 95% intervals"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Compare block-size policies: tau, speedup, tokens/s, oracle agreement and gap closed, with paired CIs."""
    from specpolicy.evaluate import check_candidates, summarize
    from specpolicy.policy import DEFAULT_CANDIDATES
    from specpolicy.registry import get_registry
    from specpolicy.sweep.store import SweepStore

    if mode not in ("replay", "live"):
        raise fail(f"unknown mode {mode!r}; use replay or live")
    names = [n.strip() for n in policies.split(",") if n.strip()]
    if not names:
        raise fail("no policies given; e.g. --policies fixed16,blockpilot,oracle")
    store: SweepStore | None = None
    try:
        if mode == "live" and sweep is not None:
            raise ValueError("--sweep evaluates stored results; drop it for --mode live")
        if sweep is not None:
            store = SweepStore.load(sweep)
            if candidates and parse_candidates(candidates) != list(store.candidates):
                raise ValueError(f"--candidates {candidates} do not match the sweep's {list(store.candidates)}")
            chosen_candidates = list(store.candidates)
        else:
            chosen_candidates = parse_candidates(candidates) if candidates else list(DEFAULT_CANDIDATES)
        registry = get_registry()
        built = [registry.create(name, chosen_candidates) for name in names]
        if store is not None:
            for policy in built:
                check_candidates(policy, store.candidates)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from exc

    rows, all_results = [], []
    datasets = [sweep.name] if sweep is not None else [d.strip() for d in dataset.split(",") if d.strip()]
    try:
        for name in datasets:
            results = _run_dataset(name, mode, store, built, chosen_candidates, temperature, max_samples,
                                   max_new_tokens, seed, target, drafter, device, dtype)
            for row in summarize(results, n_bootstrap=bootstrap):
                rows.append({"dataset": name, **row})
            all_results.append((name, results))
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from exc
    emit(rows, fmt, title=f"specpolicy compare ({mode}, T={temperature})")
    if plot is not None:
        from specpolicy.report import plot_comparison

        for name, results in all_results:
            path = plot if len(all_results) == 1 else plot.with_name(f"{plot.stem}-{name}{plot.suffix}")
            plot_comparison(results, path, title=f"{name}: {mode}, T={temperature}")
            stderr.print(f"plot saved to {path}")


@functools.cache
def _load_pair_once(target: str, drafter: str, dtype: str, device: str):
    """The model pair, loaded once per process however many datasets a live compare walks."""
    from specpolicy.models import load_pair

    return load_pair(target, drafter, dtype, device)


def _run_dataset(name, mode, store, policies, candidates, temperature, max_samples, max_new_tokens, seed,
                 target, drafter, device, dtype):
    from specpolicy.cli.progress import progress_bar
    from specpolicy.data.registry import load_prompts
    from specpolicy.evaluate import evaluate_live, evaluate_replay

    if store is None:
        prompts = load_prompts(name, max_samples, seed)
        if mode == "live":
            from specpolicy.data.prompts import encode_prompt
            from specpolicy.decoding import SpeculativeDecoder
            pair = _load_pair_once(target, drafter, dtype, device)
            decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature,
                                         max_new_tokens=max_new_tokens)
            encoded = [(p.id, encode_prompt(pair.tokenizer, p, 256)) for p in prompts]
            with progress_bar(f"live {name}", len(encoded)) as update:
                counter = iter(range(1, len(encoded) + 1))
                return evaluate_live(decoder, encoded, policies, seed, on_prompt=lambda: update(next(counter)))
        from specpolicy.sweep.run import SweepSettings, run_sweep

        settings = SweepSettings(dataset=name, candidates=candidates, temperature=temperature,
                                 max_new_tokens=max_new_tokens, max_samples=max_samples, seed=seed, target=target,
                                 drafter=drafter, dtype=dtype, device=device)
        from specpolicy.models.loading import weights_fingerprint

        identity = {**settings.meta(), "weights": [weights_fingerprint(target, "target"),
                                                   weights_fingerprint(drafter, "drafter")]}
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
        out = cache_dir() / "sweeps" / f"{Path(name).stem}-{key}"
        with progress_bar(f"sweep {name} (replay, cached in {out})", len(prompts)) as update:
            store = run_sweep(settings, str(out), prompts, on_progress=update)
    return evaluate_replay(store, policies)
