"""Fidelity across implementations: llama.cpp's llama-server against specpolicy on the same stored prompts.

Per prompt: greedy outputs with DFlash (n_max 15, 7, 3 and p_min 0.5) against the same server's plain decoding
(the engine's own losslessness) and against specpolicy's recorded output; the engine's accepted drafts per
cycle at n_max 15 (``LLAMA_TRACE``'s per-cycle log) against specpolicy's replay at B = 16, whole and with the
last draft capped as llama.cpp caps it (at most the tokens left in the budget minus one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specpolicy.cycles import Plan
from specpolicy.engines.llamacpp import ServerPool, Setting
from specpolicy.sweep.store import SweepStore

SETTINGS = (Setting(1), Setting(16), Setting(8), Setting(4), Setting(16, 0.5))
TOLERANCE = 0.05
"""the issue's per-prompt bound on the relative difference of mean accepted tokens per cycle"""


@dataclass
class Fidelity:
    prompts: int = 0
    lossless_failures: list[str] = field(default_factory=list)
    differs_from_recorded: list[str] = field(default_factory=list)
    within: int = 0
    within_capped: int = 0
    cycles_equal_capped: int = 0
    worst: list[tuple[str, float, float]] = field(default_factory=list)

    def rows(self) -> list[tuple[str, object]]:
        return [("prompts", self.prompts),
                ("DFlash outputs differing from the server's plain decoding", len(self.lossless_failures)),
                ("plain outputs differing from specpolicy's recorded ones", len(self.differs_from_recorded)),
                (f"prompts with mean accepted per cycle within {TOLERANCE:.0%} (replay whole)", self.within),
                (f"... within {TOLERANCE:.0%} (replay's last drafts capped as llama.cpp's)",
                 self.within_capped),
                ("prompts whose every cycle's accepted drafts equal replay's (capped)",
                 self.cycles_equal_capped)]


def _replayed(record) -> tuple[list[int], list[int]]:
    """Replay's accepted drafts per cycle at B = 16: whole, and as llama.cpp drafts them (at most the budget
    left - 1 drafts; with one token left, a plain step that drafts nothing and logs no cycle)."""
    whole, capped, left = [], [], record.output_length - 1
    for cycle in record.table().simulate(Plan.fixed(16)):
        whole.append(cycle.accepted)
        if left > 1:
            capped.append(min(cycle.accepted, left - 1))
        left -= cycle.committed
    return whole, capped


def bench_fidelity(binary: Path, folder: Path, store: SweepStore, prompts: int, threads: int = 1,
                   on_progress: Callable[[int, int], None] | None = None) -> Fidelity:
    os.environ["LLAMA_TRACE"] = "1"  # llama-server logs "accepted A/D draft tokens" per cycle
    result = Fidelity()
    records = list(store.records())[:prompts]
    for n, record in enumerate(records, start=1):
        prompt = list(record.replay.sequence[:record.prompt_length])
        recorded = tuple(record.replay.sequence[record.prompt_length:][:record.output_length])
        # fresh logs
        with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", threads) as pool:
            # each server's warm-up request comes first
            warmed = {s: len(pool[s].log_text()) for s in SETTINGS}
            outputs = {s: pool[s].complete(prompt, record.replay.budget).tokens for s in SETTINGS}
            log = pool[Setting(16)].log_text()[warmed[Setting(16)]:]
            engine = [int(a) for a in re.findall(r"accepted\s+(\d+)/\s*\d+ draft", log)]
        result.prompts += 1
        if any(out != outputs[Setting(1)] for out in outputs.values()):
            result.lossless_failures.append(record.prompt_id)
        if outputs[Setting(1)] != recorded:
            result.differs_from_recorded.append(record.prompt_id)
        whole, capped = _replayed(record)
        mean = sum(engine) / max(1, len(engine))
        for replay, counter in ((whole, "within"), (capped, "within_capped")):
            theirs = sum(replay) / max(1, len(replay))
            if abs(mean - theirs) <= TOLERANCE * max(theirs, 1e-9) or mean == theirs:
                setattr(result, counter, getattr(result, counter) + 1)
            elif counter == "within":
                result.worst.append((record.prompt_id, mean, theirs))
        result.cycles_equal_capped += engine == capped
        if on_progress:
            on_progress(n, len(records))
    return result
