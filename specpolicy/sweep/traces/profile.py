"""Model-Optimizer's ``speculation_profile.json``: a drafter's conditional acceptance rates, drawn into
decodes with a seed (positions independent: what a choice gains on a draw is the draw's noise)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specpolicy.defaults import MAX_BLOCK_SIZE, MAX_DRAWN_POSITIONS, PROFILE_DRAW
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces.common import TraceImport, chain_record, store_meta, trace_file

FORMAT = "speculation-profile"


@dataclass(frozen=True)
class ProfileDraw:
    """How many decodes of how many tokens are drawn from a speculation profile, and the seed of the draw."""

    requests: int = PROFILE_DRAW[0]
    tokens: int = PROFILE_DRAW[1]
    seed: int = 0


def read_profile(file: Path) -> tuple[dict, int, np.ndarray]:
    """(the profile, K, its conditional acceptance rates [K]); a ValueError naming the problem otherwise."""
    try:
        profile = json.loads(file.read_text(encoding="utf-8"))
        k, rates = profile["num_speculative_tokens"], profile["conditional_accept_rates"]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{file} is not JSON; pass a speculation_profile.json") from None
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{file} has no {missing} field: not a speculation_profile.json") from None
    problems = [(profile.get("measured") is False, "is an unmeasured stub (measured: false); measure the "
                                                   "drafter first (Model-Optimizer's specdec_bench writes "
                                                   "the profile)"),
                (profile.get("verification_method", "longest_prefix") != "longest_prefix",
                 f"was measured with verification_method {profile.get('verification_method')!r}, not a "
                 "longest accepted prefix, which replay needs"),
                (not (type(k) is int and 1 <= k < MAX_BLOCK_SIZE), "num_speculative_tokens must be an "
                                                                   f"integer in 1..{MAX_BLOCK_SIZE - 1}"),
                (not (isinstance(rates, list) and len(rates) == k
                      and all(isinstance(r, int | float) and 0 <= r <= 1
                                                                          for r in rates)),
                 "conditional_accept_rates must hold num_speculative_tokens rates in [0, 1]")]
    for failed, problem in problems:
        if failed:
            raise ValueError(f"{file} {problem}")
    return profile, k, np.asarray(rates, dtype=float)


def import_profile(file: str | Path, out: str | Path, candidates: Sequence[int] | None = None,
                   dataset: str | None = None, draw: ProfileDraw = ProfileDraw()) -> TraceImport:
    """Draw decodes from Model-Optimizer's ``speculation_profile.json`` (``conditional_accept_rates``: P(draft
    i + 1 accepted | the first i were), measured at ``num_speculative_tokens`` K): drafts accepted while a
    seeded uniform falls below the next rate. A chain drafter's profile (``chain_analytic``) covers every
    block 1..K + 1, another (``measured_per_k``: DFlash, DSpark) block K + 1 only. Positions are independent,
    so what per-prompt or per-step choice gains on a draw is its noise."""
    file = trace_file(file, "a speculation_profile.json (Model-Optimizer's specdec_bench writes one)")
    if draw.requests < 1 or draw.tokens < 2 or draw.requests * draw.tokens > MAX_DRAWN_POSITIONS:
        raise ValueError(f"a draw of --requests {draw.requests} x --tokens {draw.tokens} positions is "
                         f"outside 1 x 2 .. {MAX_DRAWN_POSITIONS:,} positions; pass fewer --tokens or "
                         "--requests")
    profile, k, rates = read_profile(file)
    chain = profile.get("accept_length_model") == "chain_analytic"
    covered = tuple(range(1, k + 2)) if chain else (k + 1,)
    if candidates is not None and not set(candidates) <= set(covered):
        what, span = ("chain", f"blocks 1..{k + 1}") if chain else \
            (f"{profile.get('method') or 'block'} drafter's", f"block {k + 1} only")
        raise ValueError(f"{file}: a {what} profile at K = {k} covers {span}; pass --candidates within it "
                         "or leave it out")
    sizes = covered if candidates is None else tuple(sorted(candidates))
    dataset = dataset or file.parent.name or file.stem
    rng = np.random.default_rng(draw.seed)
    meta = store_meta(file, dataset, FORMAT, sizes, seed=draw.seed, requests=draw.requests,
                 tokens=draw.tokens, drafter_kind="chain" if chain else "block")
    store = SweepStore.fill(out, meta, (
        chain_record(f"{dataset}:{r}", r, np.cumprod(rng.random((draw.tokens, k)) < rates, 1).sum(1).tolist(),
                     sizes, [], dataset) for r in range(draw.requests)))
    return TraceImport(store, draw.requests, k, [], {}, f"block sizes {sizes[0]}..{sizes[-1]} as drawn from "
                                                        f"the profile (seed {draw.seed}, {draw.requests} "
                                                        f"decodes of {draw.tokens} tokens; positions drawn "
                                                        "independently: oracle gains over fixed sizes are "
                                                        "the draw's noise)")
