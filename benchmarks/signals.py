"""What a signal read before drafting is worth: gates that speculate only where the text so far repeats
itself.

The drafter's pass is what a cycle pays before anything is known, so where it costs several plain steps
(llama.cpp's DFlash on this CPU: a B = 16 cycle about eight) a per-step rule wins only if it can tell, before
drafting, the steps whose block will be accepted long. The one signal an engine has there besides the cycle
history is the committed text: the longest suffix of it that occurred earlier (what an n-gram drafter looks
up). A gate speculates at block B when that match is at least ``m`` tokens and no speculative cycle failed in
the last ``w`` steps, and keeps speculating while cycles accept at least ``t`` drafts; otherwise it steps
plainly (B = 1). Its parameters are chosen on the training side of a store's split and reported on the
held-out side, beside plain decoding and the per-step oracle, priced with one cost table (modelled time, exact
replay).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from specpolicy.costs import CostTable
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


@dataclass(frozen=True)
class Gate:
    block: int
    match: int
    wait: int
    keep: int

    def seconds(self, table: ReplayTable, matches: list[int], costs: CostTable) -> float:
        """Modelled seconds of the gate's decode of ``table`` (``matches`` per output position)."""
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


def _decodes(store: SweepStore) -> list[tuple[ReplayTable, list[int]]]:
    tables = [record.table() for record in store.records()]
    return [(t,
             suffix_matches(t.sequence, t.prompt_length, t.prompt_length + t.output_length)) for t in tables]


def speed(decodes: list[tuple[ReplayTable, list[int]]], costs: CostTable, gate: Gate | None) -> float:
    """Pooled speed over plain decoding (``costs.ar_seconds`` a token) of ``gate`` (``None``: the per-step
    oracle)."""
    plain = sum(t.tokens() for t, _ in decodes) * costs.ar_seconds
    if gate is None:
        spent = sum(costs.cycles_seconds(t.simulate(t.oracle_plan(costs, [b for b in t.candidates
                                                                          if b in costs.verify_seconds])))
                    for t, _ in decodes)
    else:
        spent = sum(gate.seconds(t, m, costs) for t, m in decodes)
    return plain / spent


def paying_share(decodes: list[tuple[ReplayTable, list[int]]], costs: CostTable, block: int,
                 match: int) -> float:
    """Of the positions whose suffix match is at least ``match``, the share where a cycle of ``block`` would
    commit enough tokens to pay for itself against plain steps."""
    needed = costs.cycle_seconds(block) / costs.ar_seconds - 1  # drafts accepted for the cycle to pay
    hits = [int(t.accepted[i, t.candidates.index(block)]) >= needed for t, m in decodes
            for i in range(t.output_length) if m[i] >= match]
    return sum(hits) / max(1, len(hits))


def bench_signals(sweep: str, costs: CostTable, blocks: Sequence[int]) -> dict[str, float]:
    """The best gate on the training side, and on the held-out side: it, plain steps on the drafter's server
    (``fixed1``) and the per-step oracle, each as speed over plain decoding; and over the whole store, the
    share of positions where the largest block pays, by suffix match."""
    train, held = (_decodes(SweepStore.load(sweep, split=side)) for side in ("train", "validation"))
    grid = [Gate(*g) for g in itertools.product(blocks, (0, 4, 8, 16, 24, 32), (0, 8, 32, 64), (4, 8, 12))]
    best = max(grid, key=lambda gate: speed(train, costs, gate))
    shares = {f"share of positions where B = {max(blocks)} pays, match >= {m}": paying_share(
        train + held, costs, max(blocks), m) for m in (0, 8, 32)}
    return {"fixed1 (x plain decoding)": speed(held, costs, Gate(1, 0, 0, 0)),
            f"{best} (x plain decoding)": speed(held, costs, best),
            "oracle-step (x plain decoding)": speed(held, costs, None), **shares}
