"""What a signal read before drafting is worth: gates that speculate only where the text so far repeats
itself, or where the target is sure of its next token.

The drafter's pass is what a cycle pays before anything is known, so where it costs several plain steps
(llama.cpp's DFlash on this CPU: a B = 16 cycle about eight) a per-step rule wins only if it can tell, before
drafting, the steps whose block will be accepted long. The one signal an engine has there besides the cycle
history is the committed text: the longest suffix of it that occurred earlier (what an n-gram drafter looks
up); the other is the target's own distribution at the anchor, computed by the verify that committed it (its
top-1 probability). A gate speculates at block B when the signal is at least ``m`` (match tokens, or a
probability) and no speculative cycle failed in the last ``w`` steps, and keeps speculating while cycles
accept at least ``t`` drafts; otherwise it steps plainly (B = 1). Its parameters are chosen on the training
side of a store's split and reported on the held-out side, beside plain decoding and the per-step oracle,
priced with one cost table (modelled time, exact replay).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from specpolicy.costs import CostTable
from specpolicy.replay.schedules import oracle_plans
from specpolicy.replay.table import ReplayTable
from specpolicy.sweep.store import SweepStore

LONGEST_MATCH = 32


def suffix_matches(sequence: Sequence[int], start: int, end: int, longest: int = LONGEST_MATCH) -> list[int]:
    """For every anchor in ``start..end - 1``: the longest suffix (at most ``longest``) of
    ``sequence[:anchor + 1]`` that also ends earlier in it."""
    text, matches = list(sequence), []
    for anchor in range(start, end):
        k = 0
        # a suffix of k + 1 tokens also ends at some j < anchor
        while k < longest and anchor - k >= 1 and any(
                text[j - k:j + 1] == text[anchor - k:anchor + 1] for j in range(k, anchor)):
            k += 1
        matches.append(k)
    return matches


def target_confidences(store: SweepStore, tables: Sequence[ReplayTable]) -> list[list[float]]:
    """Per table, the store's target's top-1 probability at every output anchor (float32, teacher-forced
    over the recorded text: the distribution the verify that committed the anchor computed)."""
    import torch

    from specpolicy.models.loading import load_target

    target, _ = load_target(store.meta.get("target", "tiny"), dtype="float32")
    confidences = []
    for t in tables:
        with torch.no_grad():
            logits = target(torch.tensor([list(t.sequence)])).logits[0]
        top = torch.softmax(logits.float(), -1).max(-1).values  # [positions]
        confidences.append(top[t.prompt_length:t.prompt_length + t.output_length].tolist())
    return confidences


@dataclass(frozen=True)
class Gate:
    block: int
    match: float
    wait: int
    keep: int

    def seconds(self, table: ReplayTable, matches: Sequence[float], costs: CostTable) -> float:
        """Modelled seconds of the gate's decode of ``table`` (``matches``: the signal per output
        position)."""
        session, since, speculating, spent = table.session(), self.wait, False, 0.0
        while not session.done:
            here = matches[session.position - table.prompt_length]
            size = self.block if speculating or (here >= self.match and since >= self.wait) else 1
            cycle = session.step(size)
            spent += costs.cycle_seconds(size)
            if size > 1:
                speculating = cycle.accepted >= self.keep
                since = since if speculating else 0
            else:
                since += 1
        return spent


SIGNALS = {"match": ((0, 4, 8, 16, 24, 32), (0, 8, 32)),
           "target top-1": ((0.5, 0.8, 0.9, 0.95, 0.98, 0.99), (0, 0.9, 0.98))}
"""per signal: the thresholds a gate is fitted over, and those the paying shares are reported at"""


def _signal(store: SweepStore, tables: Sequence[ReplayTable], signal: str) -> list[Sequence[float]]:
    """``signal`` (a key of :data:`SIGNALS`) at every output position of each of ``tables``."""
    if signal == "target top-1":
        return target_confidences(store, tables)
    return [suffix_matches(t.sequence, t.prompt_length, t.prompt_length + t.output_length) for t in tables]


def speed(decodes: list[tuple[ReplayTable, list[int]]], costs: CostTable, gate: Gate | None) -> float:
    """Pooled speed over plain decoding (``costs.ar_seconds`` a token) of ``gate`` (``None``: the per-step
    oracle)."""
    plain = sum(t.tokens() for t, _ in decodes) * costs.ar_seconds
    if gate is None:
        spent = sum(costs.cycles_seconds(t.simulate(oracle_plans([t], costs, [
            b for b in t.candidates if b in costs.verify_seconds])[0])) for t, _ in decodes)
    else:
        spent = sum(gate.seconds(t, m, costs) for t, m in decodes)
    return plain / spent


def paying_share(decodes: list[tuple[ReplayTable, Sequence[float]]], costs: CostTable, block: int,
                 match: float) -> float:
    """Of the positions whose signal is at least ``match``, the share where a cycle of ``block`` would commit
    enough tokens to pay for itself against plain steps."""
    needed = costs.cycle_seconds(block) / costs.ar_seconds - 1  # drafts accepted for the cycle to pay
    hits = [int(t.accepted[i, t.candidates.index(block)]) >= needed for t, m in decodes
            for i in range(t.output_length) if m[i] >= match]
    return sum(hits) / max(1, len(hits))


def bench_signals(sweep: str, costs: CostTable, blocks: Sequence[int],
                  signals: Sequence[str] = tuple(SIGNALS)) -> dict[str, float]:
    """Per signal, the best gate on the training side, reported on the held-out side; beside it plain steps
    on the drafter's server (``fixed1``) and the per-step oracle, each as speed over plain decoding; and over
    the whole store, the share of positions where the largest block pays, by the signal."""
    store = SweepStore.load(sweep)
    train_tables = [r.table() for r in SweepStore.load(sweep, split="train").records()]
    tables = train_tables + [r.table() for r in SweepStore.load(sweep, split="validation").records()]
    result: dict[str, float] = {}
    for signal in signals:  # each signal over both sides at once (the target loads once)
        thresholds, reported = SIGNALS[signal]
        decodes = list(zip(tables, _signal(store, tables, signal)))
        train, held = decodes[:len(train_tables)], decodes[len(train_tables):]
        if not result:
            result = {"fixed1 (x plain decoding)": speed(held, costs, Gate(1, 0, 0, 0)),
                      "oracle-step (x plain decoding)": speed(held, costs, None)}
        grid = [Gate(*g) for g in itertools.product(blocks, thresholds, (0, 8, 32, 64), (4, 8, 12))]
        best = max(grid, key=lambda gate: speed(train, costs, gate))
        result[f"{signal}: {best} (x plain decoding)"] = speed(held, costs, best)
        result |= {f"{signal}: share of positions where B = {max(blocks)} pays, >= {m}": paying_share(
            train + held, costs, max(blocks), m) for m in reported}
    return result
