"""Measure a :class:`~specpolicy.costs.CostTable` robustly: interleaved repeats (every round times every block
size once, shuffled), medians with their spread, flagged by :meth:`CostTable.check`."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import torch

from specpolicy.arguments import check_count
from specpolicy.costs import CostTable, quartile_spread
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.defaults import LATENCY_CONTEXT, LATENCY_REPEATS, cache_dir
from specpolicy.models.target import crop_cache, new_cache, target_forward


def pin_threads(threads: int | None) -> int:
    """Set torch's intra-op thread count (``None`` keeps it); returns the count in force."""
    if threads is not None:
        torch.set_num_threads(check_count(threads, "threads"))
    return torch.get_num_threads()


def machine_name(device: torch.device) -> str:
    """What the timing ran on: the GPU's name, or the CPU model and its core count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")),
                         model)
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"


def _timer(decoder: SpeculativeDecoder) -> Callable[[Callable[[], object]], float]:
    def timed(run: Callable[[], object]) -> float:
        decoder.sync()
        start = time.perf_counter()
        run()
        decoder.sync()
        return time.perf_counter() - start

    return timed


def passes(decoder: SpeculativeDecoder, context_length: int, longest: int, seed: int, batch: int = 1
           ) -> tuple[Callable[..., None], Callable[[int], None]]:
    """(verify(size, hidden_states=True), draft(size)): one target and one drafter pass over ``batch``
    sequences after ``context_length`` random tokens, each cropping its cache back so it can be timed again
    (``hidden_states=False``: a plain AR step's pass, its last logits only)."""
    room = decoder.max_positions - longest if decoder.max_positions else None
    if room is not None and context_length > room:
        raise ValueError(f"--context {context_length} and {longest} more tokens pass the target's "
                         f"{decoder.max_positions} positions; pass --context {room} or less")
    target, drafter, device = decoder.target, decoder.drafter, decoder.device
    vocab = target.get_input_embeddings().num_embeddings
    seeded = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, context_length + longest), generator=seeded).repeat(batch, 1).to(device)

    def span(first: int, last: int) -> torch.Tensor:
        return torch.arange(first, last, device=device).expand(batch, -1)

    cache = new_cache(target)
    _, hidden = target_forward(target, ids[:, :context_length], span(0, context_length), cache,
                               logits_to_keep=1)
    features = drafter.context_features(hidden)
    drafter_cache = drafter.new_cache()
    # the drafter cache holds all but the last few context positions, as in decoding
    cached = context_length - 4
    drafter.cache_context(features[:, :cached], span(0, cached), drafter_cache)
    embed, lm_head = target.get_input_embeddings(), target.get_output_embeddings()

    def verify(size: int, hidden_states: bool = True) -> None:
        target_forward(target, ids[:, context_length : context_length + size],
                       span(context_length, context_length + size), cache,
                       logits_to_keep=0 if hidden_states else 1, hidden_states=hidden_states)
        crop_cache(cache, context_length)

    def draft(size: int) -> None:
        block = torch.full((batch, size), drafter.mask_token_id, device=device)
        lm_head(drafter(embed(block), features[:, cached:], span(cached, context_length + size),
                        drafter_cache)[:, 1:])
        drafter_cache.crop(cached)

    return verify, draft


@torch.inference_mode()
def measure_costs(
    decoder: SpeculativeDecoder,
    block_sizes: Iterable[int],
    context_length: int = LATENCY_CONTEXT,
    repeats: int = LATENCY_REPEATS,
    seed: int = 0,
) -> CostTable:
    """Median seconds of a drafter pass, a verify pass and a plain AR step per block size, over shuffled
    rounds (the first dropped), with the threads, dtype, device, machine and the table's warnings."""
    if repeats < 4:
        raise ValueError(f"a cost table needs at least 4 repeats for its spread, got {repeats}")
    sizes = sorted({int(b) for b in block_sizes} | {1})
    verify, draft = passes(decoder, context_length, max(sizes), seed)
    timed = _timer(decoder)
    rng = random.Random(seed)
    ar: list[float] = []
    verify_t: dict[int, list[float]] = {b: [] for b in sizes}
    draft_t: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in range(repeats + 1):
        order = [0, *sizes]  # 0 = the plain AR step
        rng.shuffle(order)
        for size in order:
            if size == 0:
                ar.append(timed(lambda: verify(1, hidden_states=False)))
                continue
            verify_t[size].append(timed(lambda s=size: verify(s)))
            draft_t[size].append(timed(lambda s=size: draft(s)) if size > 1 else 0.0)
    ar, verify_t = ar[1:], {b: t[1:] for b, t in verify_t.items()}
    draft_t = {b: t[1:] for b, t in draft_t.items()}
    cycle_t = {b: [d + v for d, v in zip(draft_t[b], verify_t[b])] for b in sizes}
    table = CostTable(
        draft_seconds={b: statistics.median(draft_t[b]) for b in sizes},
        verify_seconds={b: statistics.median(verify_t[b]) for b in sizes},
        ar_seconds=statistics.median(ar),
        threads=torch.get_num_threads(),
        dtype=str(next(decoder.target.parameters()).dtype).removeprefix("torch."),
        device=str(decoder.device),
        machine=machine_name(decoder.device),
        context_length=context_length,
        repeats=repeats,
        spread={0: quartile_spread(ar)} | {b: quartile_spread(cycle_t[b]) for b in sizes},
    )
    return replace(table, warnings=tuple(table.check()))


def cached_costs(decoder: SpeculativeDecoder, block_sizes: Iterable[int], models: dict,
                 report: Callable[[str], object] | None = None) -> CostTable:
    """This machine's cost table for these models, threads and block sizes, measured once and cached under
    ``cache_dir()/costs`` (a flagged table is not cached); ``report`` hears what happened."""
    sizes = sorted({int(b) for b in block_sizes} | {1})
    identity = {"machine": machine_name(decoder.device), "threads": torch.get_num_threads(), "models": models,
                "sizes": sizes}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]
    file = cache_dir() / "costs" / f"{key}.json"
    if file.exists():
        return CostTable.load(file)
    say = report or (lambda line: None)
    say(f"measuring this machine's cost table ({len(sizes)} block sizes, {torch.get_num_threads()} "
        "thread(s))")
    costs = measure_costs(decoder, sizes)
    if costs.warnings:
        for line in costs.flag_warnings("measured now"):
            say(f"warning: {line}")
        say("the flagged table is used for this run only and not cached: the next run measures again")
        return costs
    file.parent.mkdir(parents=True, exist_ok=True)
    costs.save(file)
    say(f"cost table cached in {file}")
    return costs
