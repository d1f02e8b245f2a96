"""``specpolicy sweep``: every prompt x every candidate block size into a resumable sweep store."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import typer

from specpolicy.arguments import check_candidate_set, check_counts
from specpolicy.cli.common import (
    DatasetOption,
    DeviceOption,
    DrafterOption,
    DtypeOption,
    MaxNewTokensOption,
    SeedOption,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    fail,
    settings_from,
    stderr,
)
from specpolicy.defaults import MAX_PROMPT_TOKENS, SHIPPED_SWEEP_CANDIDATES, SWEEP_MAX_SAMPLES
from specpolicy.sweep.settings import Executor, SweepMode
from specpolicy.sweep.traces.profile import ProfileDraw


def parse_candidates(text: str, option: str = "--candidates", block_sizes: bool = True) -> list[int]:
    """``"14,15,16"`` or ``"14-18"`` -> sorted sizes; a clear error naming ``option`` otherwise (block sizes
    above the engine's largest are refused; ``block_sizes=False`` for batch sizes)."""
    try:
        if "-" in text and "," not in text:
            low, high = (int(x) for x in text.split("-"))
            values = list(range(low, high + 1))
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"{option} must look like 14,15,16,17,18 or 14-18, got {text!r}") from None
    if not values and "-" in text:
        raise typer.BadParameter(f"{option} {text} runs backwards; write the smaller end first, e.g. "
                                 f"{'-'.join(text.split('-')[::-1])}")
    try:
        return list(check_candidate_set(values, option) if block_sizes else check_counts(values, option))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def sweep(
    dataset: str = DatasetOption,
    candidates: str = typer.Option(",".join(map(str, SHIPPED_SWEEP_CANDIDATES)),
                                   help="block sizes, e.g. 1,2,4,8,16,32 or 14-18 (1 = no speculation)"),
    temperature: float = TemperatureOption,
    out: Path = typer.Option(..., help="sweep store folder (rerun the same command to resume)"),
    mode: SweepMode = typer.Option(SweepMode.replay, help="replay (one decode + exact counterfactuals) or "
                                                          "live (decode every B)"),
    max_samples: int = typer.Option(SWEEP_MAX_SAMPLES, min=1, help="prompts (seeded shuffle)"),
    max_new_tokens: int = MaxNewTokensOption,
    max_prompt_tokens: int = typer.Option(MAX_PROMPT_TOKENS, min=1),
    seed: int = SeedOption,
    verify_lengths: bool = typer.Option(False, "--verify-lengths", help="also replay the anchors "
                                                                        "schedules that verify fewer "
                                                                        "tokens than they draft reach "
                                                                        "(for verify-length policies)"),
    confidences: str = typer.Option("", help="block sizes whose drafts' confidences to record, e.g. 8,16,32 "
                                    "(what verify-length rules read)"),
    executor: Executor = typer.Option(Executor.local, help="local, or ray (shards prompts over Ray workers)"),
    threads: int = ThreadsOption,
    target: str = TargetOption,
    drafter: str = DrafterOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Record, per prompt, the prefill features and what every candidate block size does."""
    from specpolicy.data.registry import load_prompts
    from specpolicy.sweep.resume import check_resumable
    from specpolicy.sweep.run import run_sweep
    from specpolicy.sweep.settings import SweepSettings

    settings = settings_from(SweepSettings, locals(), candidates=parse_candidates(candidates),
                             mode=mode.value,
                             confidence_sizes=parse_candidates(confidences, "--confidences") if confidences
                             else [])
    settings.validate()
    check_resumable(out, settings.meta())
    prompts = load_prompts(dataset, max_samples, seed)
    if executor is Executor.ray:
        from specpolicy.sweep.ray_executor import run_sweep_ray

        store = run_sweep_ray(settings, str(out), prompts)
    else:
        from specpolicy.cli.progress import progress_bar

        with progress_bar(f"sweep {dataset} ({mode.value})", len(prompts)) as update:
            store = run_sweep(settings, str(out), prompts, on_progress=update)
    done = len(store.done_ids())
    stderr.print(f"sweep store {out}: {done} prompts recorded")


def import_blockpilot(
    folder: Path = typer.Argument(..., help="a '{dataset}_{seed}T{temperature}' folder of '{B}.json' files"),
    out: Path = typer.Option(..., help="sweep store to create"),
    candidates: str = typer.Option("14-18", help="block sizes to keep: the paper's 14-18 (its oracle's "
                                                 "range), a list such as 4-32, or all"),
) -> None:
    """Import the BlockPilot authors' per-prompt tau files into a sweep store (no features); ``1.json``, their
    predictor's choices, is kept beside it and compared with the best tau."""
    from specpolicy.sweep.importers import agreement
    from specpolicy.sweep.importers import import_blockpilot as run_import

    sizes = None if candidates == "all" else parse_candidates(candidates)
    store, choices = run_import(folder, out, sizes)
    kept = list(store.candidates)
    label = "the paper's 14..18" if kept == [14, 15, 16, 17, 18] else f"block sizes {kept}"
    stderr.print(f"imported {len(store.done_ids())} prompts x {len(kept)} block sizes into {out} ({label}; "
                 "--candidates all keeps every file)")
    ignored = sorted(f.name for f in Path(folder).iterdir() if f.is_file() and not (f.suffix == ".json"
                                                                                     and f.stem.isdigit()))
    if ignored:
        stderr.print(f"not imported (not a '{{B}}.json' of taus): {', '.join(ignored)}", soft_wrap=True)
    if choices:
        hits, total = agreement(store, choices)
        stderr.print(f"the authors' choices (1.json, saved as {out}/authors_choices.json) "
                     f"have the best tau over {label} (ties included) on {hits} of {total} "
                     "prompts; evaluate them with --policies "
                     f"choices:{out}/authors_choices.json", soft_wrap=True)


def import_traces(
    file: list[Path] = typer.Argument(..., help="a trace: SpecDecode-Bench's per-position JSONL, Spec-Bench "
                                      "answers, vLLM, SGLang or llama-server responses (several: runs at "
                                      "other blocks, one store), dflash-mlx's cycle_events.jsonl, a "
                                      "speculation_profile.json or a calibration bank's acceptance.parquet"),
    out: Path = typer.Option(..., help="sweep store to create (rerun to resume)"),
    drafter: str = typer.Option("eagle", help="SpecDecode-Bench: whose acceptance to import, eagle "
                                              "(EAGLE-3) or ngram"),
    candidates: str = typer.Option(None, help="block sizes replay may run (default: every one the trace "
                                              "covers; a per-step record covers the one block its run "
                                              "drafted)"),
    dataset: str = typer.Option(None, help="dataset name of the prompts (default: from the file name)"),
    requests: int = typer.Option(ProfileDraw.requests, min=1, help="speculation profile: decodes to draw"),
    tokens: int = typer.Option(ProfileDraw.tokens, min=2, help="speculation profile: tokens per decode"),
    seed: int = typer.Option(ProfileDraw.seed, help="speculation profile: seed of the draw"),
    prompts: str = typer.Option(None, help="the prompts the engine ran (a prompt set or .jsonl/.txt file), "
                                           "each under its request's id: their prefill logits, which "
                                           "BlockPilot reads, are computed with --target"),
    target: str = TargetOption,
    target_drafter: str = typer.Option(None, help="with --prompts: the target's DFlash drafter (default: "
                                                  "--target's zoo pair)"),
) -> None:
    """Import a real model's acceptance traces into a sweep store, saying what replay is exact for."""
    from specpolicy.sweep.traces import TraceArgs
    from specpolicy.sweep.traces import import_traces as import_file

    sizes = parse_candidates(candidates) if candidates else None
    given = {name for name, value, default in (("drafter", drafter, TraceArgs.drafter), *(
        (f.name, value, f.default) for f, value in zip(fields(ProfileDraw), (requests, tokens, seed))))
        if value != default}
    if not prompts and (target_drafter or target != TargetOption.default):
        raise fail("--target and --target-drafter prefill the prompts of --prompts: add --prompts FILE")
    prefill = (prompts, target, target_drafter or target) if prompts else None
    result = import_file(file, out, TraceArgs(drafter, sizes, dataset, ProfileDraw(requests, tokens, seed),
                                              frozenset(given), prefill))
    stderr.print(f"imported {result.requests} decodes into {out}; replay is exact for "
                 f"{result.exact_for} (the longest accepted run is {result.longest_drafts} "
                 "drafts)", soft_wrap=True)
    if result.other_run_tokens:
        stderr.print(f"{len(result.other_run_tokens)} requests carry a token array from another run (its "
                     "length differs from the acceptance array's); the acceptance array alone decides "
                     "their replay",
                     soft_wrap=True)
    for request, why in result.skipped.items():
        stderr.print(f"skipped request {request}: {why}", soft_wrap=True)
