"""Sweep benchmark: replay cost vs one live decode and vs the naive live sweep; replay/live agreement."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.evaluation.metrics import cycle_rows, cycles_agree
from specpolicy.sweep.replay import build_replay


@dataclass
class SweepBenchResult:
    prompts: int
    candidates: list[int]
    one_live_decode_seconds: float
    replay_sweep_seconds: float
    live_sweep_seconds: float
    cycles_compared: int
    cycles_agreeing: int
    disagreements: list[str] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str]]:
        share = self.cycles_agreeing / max(1, self.cycles_compared)
        return [
            ("prompts x candidates", f"{self.prompts} x {len(self.candidates)} {self.candidates}"),
            ("one live decode at B=16 (s)", f"{self.one_live_decode_seconds:.2f}"),
            ("replay sweep, all candidates (s)", f"{self.replay_sweep_seconds:.2f}"),
            ("naive live sweep, all candidates (s)", f"{self.live_sweep_seconds:.2f}"),
            ("replay cost / one live decode",
             f"{self.replay_sweep_seconds / self.one_live_decode_seconds:.2f}x"),
            ("naive sweep cost / one live decode",
             f"{self.live_sweep_seconds / self.one_live_decode_seconds:.2f}x"),
            ("replay/live cycle agreement",
             f"{self.cycles_agreeing}/{self.cycles_compared} = {100 * share:.2f}%"),
        ]


def bench_sweep(decoder: SpeculativeDecoder, prompts: Sequence[list[int]], candidates: Sequence[int],
                max_new_tokens: int,
                on_progress: Callable[[int, int], None] | None = None) -> SweepBenchResult:
    """Time the three ways for every prompt and compare replayed with live cycles."""
    one = replay = live = 0.0
    compared = agreeing = 0
    notes: list[str] = []
    decoder.generate(prompts[0], 16, max_new_tokens=4)  # warm-up
    for n, ids in enumerate(prompts):
        start = time.perf_counter()
        decoder.generate(ids, 16, max_new_tokens=max_new_tokens)
        one += time.perf_counter() - start
        start = time.perf_counter()
        table, _ = build_replay(decoder, ids, candidates, max_new_tokens=max_new_tokens)
        replay += time.perf_counter() - start
        for size in candidates:
            start = time.perf_counter()
            trace = decoder.generate(ids, size, max_new_tokens=max_new_tokens)
            live += time.perf_counter() - start
            simulated = table.simulate(size)
            same, cycles, first = cycles_agree(trace.cycles, simulated)
            compared, agreeing = compared + cycles, agreeing + same
            if first is not None and len(notes) < 10:
                notes.append(f"prompt {n} B={size} cycle {first}: live "
                             f"{cycle_rows(trace.cycles[first:first + 1])} "
                             f"vs replay {cycle_rows(simulated[first:first + 1])}")
        if on_progress:
            on_progress(n + 1, len(prompts))
    return SweepBenchResult(len(prompts), list(candidates), one, replay, live, compared, agreeing, notes)
