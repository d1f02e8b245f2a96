"""Exact counterfactual replay: what every block size would have done, from one decode.

Lossless decoding emits the same tokens whatever the block size (at T = 0, and at T > 0 with
argmax drafts and positional uniforms, given the seed). The target's features at a position depend
only on the tokens before it, and the drafter's block at anchor ``s`` depends only on the features
before ``s``, the anchor token and B. So one decode, one teacher-forced target pass and batched
drafter passes give the accepted length of any block size at any anchor a schedule can reach; any
per-prompt or per-cycle schedule is then simulated without another target pass.

Only reachable anchors are drafted: from the first anchor, every candidate's accepted length
leads to a next anchor, and so on. Candidates near each other mostly accept the same drafts, so
this visits a few anchors per cycle of the live decode instead of every output position.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specpolicy.costs import CostTable
from specpolicy.decoding import DecodeState, DecodeTrace, SpeculativeDecoder
from specpolicy.decoding.decoder import commit_tokens
from specpolicy.decoding.target import new_cache, target_forward
from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.models.blocks import draft_mixed_blocks
from specpolicy.policy import oracle_label


@dataclass(frozen=True)
class SimulatedCycle:
    """One simulated cycle: like :class:`~specpolicy.decoding.CycleRecord`, without timings."""

    block_size: int
    accepted: int
    committed: int


def mean_acceptance(cycles: Sequence[SimulatedCycle]) -> float:
    """tau of simulated cycles: the mean of accepted + 1 (0 without cycles)."""
    return float(np.mean([c.accepted + 1 for c in cycles])) if cycles else 0.0


@dataclass
class ReplayTable:
    """Accepted drafts of every candidate block size at every anchor of one prompt's decode.

    ``accepted[i, j]``: drafts accepted by a block of size ``candidates[j]`` anchored at absolute
    position ``prompt_length + i``; -1 where no schedule of candidates reaches that anchor.
    ``sequence``: prompt + output + the continuation past the end that verification would have read.
    ``output_length``: tokens in the real output.
    """

    prompt_length: int
    output_length: int
    candidates: tuple[int, ...]
    accepted: np.ndarray
    sequence: list[int]
    stop_token_ids: tuple[int, ...]
    budget: int

    @classmethod
    def from_record(cls, record: dict) -> ReplayTable:
        """The table stored in a replay-sweep record (see :meth:`to_record`)."""
        if "replay" not in record:
            raise ValueError(f"record {record['prompt_id']} has no replay table; per-cycle policies need a replay "
                             "sweep (specpolicy sweep --mode replay)")
        replay = record["replay"]
        return cls(record["prompt_length"], replay["output_length"], tuple(replay["candidates"]),
                   np.asarray(replay["accepted"], dtype=np.int16), replay["sequence"],
                   tuple(replay["stop_token_ids"]), replay["budget"])

    def to_record(self) -> dict:
        """The ``replay`` entry of a sweep record (the prompt length is stored beside it)."""
        return {"candidates": list(self.candidates), "accepted": self.accepted.tolist(), "sequence": self.sequence,
                "output_length": self.output_length, "stop_token_ids": list(self.stop_token_ids),
                "budget": self.budget}

    def _column(self, block_size: int) -> int:
        try:
            return self.candidates.index(block_size)
        except ValueError:
            raise ValueError(
                f"block size {block_size} is not among this replay's candidates {list(self.candidates)}"
            ) from None

    def start(self) -> tuple[int, int, bool]:
        """(anchor position, tokens produced, done) before the first cycle."""
        p = self.prompt_length
        done = self.sequence[p] in set(self.stop_token_ids) or min(self.budget, self.output_length) <= 1
        return p, 1, done

    def cycle(self, position: int, produced: int, size: int) -> tuple[SimulatedCycle, int, int, bool]:
        """One cycle of block size ``size`` at anchor ``position``: (cycle, next position, produced, done)."""
        accepted = int(self.accepted[position - self.prompt_length, self._column(size)])
        if accepted < 0:
            raise ValueError(f"anchor {position} was not replayed: no schedule of {list(self.candidates)} reaches it")
        # the real output ends every schedule (a decode cut by the context limit ends before the budget)
        room = min(self.budget, self.output_length) - produced
        new, reason = commit_tokens(self.sequence[position + 1 : position + accepted + 2], set(self.stop_token_ids),
                                    room)
        return SimulatedCycle(size, accepted, len(new)), position + accepted + 1, produced + len(new), bool(reason)

    def simulate(
        self, choose: int | Callable[[DecodeState], int], prefill_logits: torch.Tensor | None = None
    ) -> list[SimulatedCycle]:
        """Cycles a fixed block size, or a per-cycle callback, would run (exactly as live decoding)."""
        if isinstance(choose, int):
            self._column(choose)
        position, produced, done = self.start()
        logits = prefill_logits if prefill_logits is not None else torch.empty(0)
        state = DecodeState(logits, self.prompt_length, position, 0, produced)
        cycles: list[SimulatedCycle] = []
        while not done:
            state.position, state.cycle, state.generated = position, len(cycles), produced
            size = choose if isinstance(choose, int) else int(choose(state))
            record, position, produced, done = self.cycle(position, produced, size)
            cycles.append(record)
            state.record(size, record.accepted)
        return cycles

    def tau(self, choose: int | Callable[[DecodeState], int]) -> float:
        """Mean acceptance length (accepted + 1) of the simulated cycles."""
        return mean_acceptance(self.simulate(choose))

    def taus(self) -> dict[int, float]:
        """tau of every candidate as a fixed block size."""
        return {b: self.tau(b) for b in self.candidates}

    def tokens(self) -> int:
        """Tokens every schedule commits after prefill (lossless: the same output whatever the sizes)."""
        return max(0, min(self.budget, self.output_length) - 1)

    def fixed_seconds(self, costs: CostTable) -> dict[int, float]:
        """Modelled decode seconds of every candidate as a fixed block size."""
        return {b: costs.seconds(c.block_size for c in self.simulate(b)) for b in self.candidates}

    def fastest_fixed(self, costs: CostTable, candidates: Sequence[int] | None = None,
                      training_block_size: int = TRAINING_BLOCK_SIZE) -> int:
        """The per-prompt time oracle: the candidate with the fewest modelled seconds as a fixed block size.

        Ties go to the candidate nearest ``training_block_size``, then the smaller.
        """
        sizes = tuple(self.candidates if candidates is None else candidates)
        seconds = self.fixed_seconds(costs)
        return sizes[oracle_label([-seconds[b] for b in sizes], sizes, training_block_size)]

    def cost_to_go(self, costs: CostTable | None = None, candidates: Sequence[int] | None = None,
                   training_block_size: int = TRAINING_BLOCK_SIZE) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """Exact dynamic programming over the anchors: the fewest modelled seconds to finish from each.

        Every cycle's outcome comes from :meth:`cycle`, so the optimum is over exactly the schedules
        replay can run. Without ``costs`` every cycle costs the same (the fewest cycles).

        Returns:
            value [n] (seconds to finish from anchor i; inf where unreachable), q [n, C] (seconds
            when the next cycle uses candidate j, then the best), and the candidates, ordered by
            preference (nearest ``training_block_size`` first), which is also the order of q's columns.
        """
        sizes = tuple(sorted(self.candidates if candidates is None else candidates,
                             key=lambda b: (abs(b - training_block_size), b)))
        for size in sizes:
            self._column(size)
        price = [costs.cycle_seconds(b) if costs is not None else 1.0 for b in sizes]
        n, p = self.accepted.shape[0], self.prompt_length
        value = np.full(n, np.inf)
        q = np.full((n, len(sizes)), np.inf)
        for i in range(n - 1, -1, -1):
            if self.accepted[i, 0] < 0:  # unreachable: never on a schedule's path
                continue
            for j, size in enumerate(sizes):
                _, nxt, _, done = self.cycle(p + i, i + 1, size)
                q[i, j] = price[j] + (0.0 if done else value[nxt - p])
            value[i] = q[i].min()
        return value, q, sizes

    def per_cycle_oracle(self, costs: CostTable | None = None, candidates: Sequence[int] | None = None,
                         training_block_size: int = TRAINING_BLOCK_SIZE) -> list[int]:
        """The schedule with the fewest modelled seconds (:meth:`cost_to_go`): a true upper bound for any
        per-cycle policy over ``candidates`` (default: the table's). Ties go to the candidate nearest
        ``training_block_size``."""
        _, q, sizes = self.cost_to_go(costs, candidates, training_block_size)
        best = np.argmin(q, axis=1)  # the first minimum: the preferred size among ties
        p = self.prompt_length
        return [c.block_size for c in self.simulate(lambda s: sizes[int(best[s.position - p])])]


def _matching_prefix(lm_head: torch.nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Length of the prefix where argmax(lm_head(hidden)) equals ``labels``: [A].

    Projects position k only for the anchors whose drafts matched at every earlier position, so the
    LM head runs on a few rows per position instead of all of them.
    """
    accepted = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device)
    alive = torch.arange(hidden.shape[0], device=hidden.device)
    for k in range(hidden.shape[1]):
        match = lm_head(hidden[alive, k]).argmax(dim=-1) == labels[alive, k]
        alive = alive[match]
        if alive.numel() == 0:
            break
        accepted[alive] += 1
    return accepted


def _accepted_at_reachable_anchors(
    decoder: SpeculativeDecoder, ids: torch.Tensor, context: torch.Tensor, prompt_length: int, n_anchor: int,
    candidates: tuple[int, ...], rows_per_pass: int,
) -> np.ndarray:
    """accepted [n_anchor, C] (int16) at the anchors some schedule reaches from the first; -1 elsewhere.

    Args:
        ids: [S] the replayed sequence. context: the target features [1, S, L*H] the drafter reads.
    """
    device = ids.device
    cache = decoder.drafter.new_cache()
    decoder.drafter.cache_context(context, torch.arange(context.shape[1], device=device).unsqueeze(0), cache)
    lm_head = decoder.target.get_output_embeddings()
    drafted = [j for j, size in enumerate(candidates) if size > 1]
    anchors_per_pass = max(1, rows_per_pass // max(1, sum(candidates[j] for j in drafted)))
    accepted = np.full((n_anchor, len(candidates)), -1, dtype=np.int16)
    frontier, seen = [0], {0}
    while frontier:
        chunk = [heapq.heappop(frontier) for _ in range(min(anchors_per_pass, len(frontier)))]
        rows = np.zeros((len(chunk), len(candidates)), dtype=np.int16)  # B = 1 accepts no drafts
        if drafted:
            anchors = torch.tensor([prompt_length + i for i in chunk for _ in drafted], device=device)
            sizes = torch.tensor([candidates[j] for _ in chunk for j in drafted], device=device)
            hidden = draft_mixed_blocks(decoder.drafter, decoder.target, ids, cache, anchors, sizes)[:, 1:]
            k = torch.arange(1, hidden.shape[1] + 1, device=device)
            labels = ids[anchors.unsqueeze(1) + k].masked_fill(k.unsqueeze(0) >= sizes.unsqueeze(1), -1)
            matched = _matching_prefix(lm_head, hidden, labels).view(len(chunk), len(drafted))
            rows[:, drafted] = matched.cpu().numpy()
        for i, row in zip(chunk, rows):
            accepted[i] = row
            for nxt in {i + int(a) + 1 for a in row}:
                if nxt < n_anchor and nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(frontier, nxt)
    return accepted


@torch.inference_mode()
def build_replay(
    decoder: SpeculativeDecoder,
    prompt_ids: Sequence[int],
    candidates: Sequence[int],
    *,
    max_new_tokens: int,
    seed: int = 0,
    reference_block_size: int = 16,
    rows_per_pass: int = 512,
) -> tuple[ReplayTable, DecodeTrace]:
    """Decode once at ``reference_block_size`` and tabulate every candidate's accepted lengths.

    Returns the table and the live trace of the reference decode (its output, prefill logits and
    timings are real). Needs argmax drafts (``decoder.draft_sampling`` off). ``rows_per_pass``: drafter
    block rows per forward (anchors x candidate sizes).
    """
    if decoder.draft_sampling:
        raise ValueError("exact replay needs argmax drafts; build the decoder with draft_sampling=False")
    candidates = tuple(int(b) for b in candidates)
    if min(candidates) < 1:
        raise ValueError(f"candidate block sizes must be >= 1, got {list(candidates)}")
    prompt = list(prompt_ids)
    p = len(prompt)
    # 1. One live decode: its output is every block size's output.
    trace = decoder.generate(prompt, reference_block_size, max_new_tokens=max_new_tokens, seed=seed)
    output = trace.output_ids
    # 2. The tokens verification would read past the end (no stop tokens, same seed and positions).
    longest = max(candidates)
    continuation = SpeculativeDecoder(
        decoder.target, decoder.drafter, temperature=decoder.temperature, top_k=decoder.top_k,
        top_p=decoder.top_p, stop_token_ids=[], max_new_tokens=longest,
    ).generate(prompt + output, reference_block_size, seed=seed).output_ids
    sequence = prompt + output + continuation
    # 3. Teacher-forced target features of every position.
    device = decoder.device
    ids = torch.tensor([sequence], device=device)
    positions = torch.arange(len(sequence), device=device).unsqueeze(0)
    _, hidden = target_forward(decoder.target, ids, positions, new_cache(decoder.target), logits_to_keep=1)
    context = decoder.drafter.context_features(hidden)
    # 4. Argmax drafts at every reachable anchor for every candidate; accepted = matching prefix length.
    accepted = _accepted_at_reachable_anchors(decoder, ids[0], context, p, len(output), candidates, rows_per_pass)
    table = ReplayTable(p, len(output), candidates, accepted, sequence, tuple(decoder.stop_token_ids), max_new_tokens)
    return table, trace
