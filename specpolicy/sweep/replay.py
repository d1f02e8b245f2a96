"""Exact counterfactual replay: what every block size would have done, from one decode (docs/concepts.md).
Lossless decoding emits the same tokens at every B and the drafter's block at anchor ``s`` reads the features
before ``s``, so one decode, one teacher-forced target pass and batched drafter passes over the anchors some
schedule reaches give every candidate's accepted length there."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np
import torch

from specpolicy.arguments import check_candidate_set
from specpolicy.decoding import DecodeTrace, SpeculativeDecoder
from specpolicy.decoding.sampling import draft_confidences
from specpolicy.defaults import REPLAY_ROWS_PER_PASS, TRAINING_BLOCK_SIZE
from specpolicy.features import to_numpy
from specpolicy.models.blocks import draft_mixed_blocks
from specpolicy.models.target import new_cache, target_forward
from specpolicy.replay.table import ReplayTable

__all__ = ["ReplayTable", "build_replay"]


def _matching_prefix(lm_head: torch.nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Length [A] of the prefix where argmax(lm_head(hidden)) equals ``labels`` (head on rows matching)."""
    accepted = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device)
    alive = torch.arange(hidden.shape[0], device=hidden.device)
    for k in range(hidden.shape[1]):
        match = lm_head(hidden[alive, k]).argmax(dim=-1) == labels[alive, k]
        alive = alive[match]
        if alive.numel() == 0:
            break
        accepted[alive] += 1
    return accepted


def _confidences(lm_head: torch.nn.Module, hidden: torch.Tensor, sizes: torch.Tensor, keep: set[int]
                 ) -> dict[int, tuple[list[float], list[float]]]:
    """Row index -> the drafter's (top-1 probabilities [B - 1], entropies [B - 1]) for the rows whose size
    is in ``keep``: argmax drafts, the numbers live decoding reports for them."""
    out = {}
    for row in (i for i, size in enumerate(sizes.tolist()) if size in keep):
        logits = lm_head(hidden[row, : int(sizes[row]) - 1])
        out[row] = draft_confidences(logits, logits.argmax(dim=-1))
    return out


def _accepted_at_reachable_anchors(
    decoder: SpeculativeDecoder, ids: torch.Tensor, context: torch.Tensor, prompt_length: int, n_anchor: int,
    candidates: tuple[int, ...], rows_per_pass: int, verify_lengths: bool = False,
    confidence_sizes: tuple[int, ...] = (),
) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, np.ndarray]]:
    """accepted [n_anchor, C] (int16; -1 where unreached) and confidences / entropies [n_anchor, B - 1] of
    each size in ``confidence_sizes``, from ``ids`` [S] and the drafter's ``context`` [1, S, L*H]; with
    ``verify_lengths``, the anchors after every shorter verify too."""
    device = ids.device
    cache = decoder.drafter.new_cache()
    decoder.drafter.cache_context(context, torch.arange(context.shape[1], device=device).unsqueeze(0), cache)
    lm_head = decoder.target.get_output_embeddings()
    drafted = [j for j, size in enumerate(candidates) if size > 1]
    anchors_per_pass = max(1, rows_per_pass // max(1, sum(candidates[j] for j in drafted)))
    accepted = np.full((n_anchor, len(candidates)), -1, dtype=np.int16)
    confidences = {b: np.full((n_anchor, b - 1), np.nan, dtype=np.float32) for b in confidence_sizes if b > 1}
    entropies = {b: rows.copy() for b, rows in confidences.items()}
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
            rows[:, drafted] = to_numpy(matched)
            for row, (confidence, entropy) in _confidences(lm_head, hidden, sizes, set(confidences)).items():
                anchor, size = chunk[row // len(drafted)], int(sizes[row])
                confidences[size][anchor], entropies[size][anchor] = confidence, entropy
        for i, row in zip(chunk, rows):
            accepted[i] = row
            steps = range(1, int(row.max()) + 2) if verify_lengths else {int(a) + 1 for a in row}
            for nxt in {i + step for step in steps}:
                if nxt < n_anchor and nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(frontier, nxt)
    return accepted, confidences, entropies


@torch.inference_mode()
def build_replay(
    decoder: SpeculativeDecoder,
    prompt_ids: Sequence[int],
    candidates: Sequence[int],
    *,
    max_new_tokens: int,
    seed: int = 0,
    reference_block_size: int = TRAINING_BLOCK_SIZE,
    rows_per_pass: int = REPLAY_ROWS_PER_PASS,
    verify_lengths: bool = False,
    confidence_sizes: Sequence[int] = (),
) -> tuple[ReplayTable, DecodeTrace]:
    """Decode once at ``reference_block_size`` (argmax drafts) and tabulate every candidate's accepted lengths
    -> (table, the real trace of that decode). ``rows_per_pass``: drafter rows per forward; ``verify_lengths``
    and ``confidence_sizes`` as in :func:`_accepted_at_reachable_anchors`."""
    if decoder.draft_sampling:
        raise ValueError("exact replay needs argmax drafts; build the decoder with draft_sampling=False")
    candidates = check_candidate_set(candidates)
    missing = sorted(set(confidence_sizes) - set(candidates))
    if missing:
        raise ValueError(f"confidence sizes {missing} are not among the candidates {list(candidates)}")
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
    accepted, confidences, entropies = _accepted_at_reachable_anchors(
        decoder, ids[0], context, p, len(output), candidates, rows_per_pass, verify_lengths,
        tuple(confidence_sizes))
    table = ReplayTable(p, len(output), candidates, accepted, sequence, tuple(decoder.stop_token_ids),
                        max_new_tokens, confidences, entropies)
    return table, trace
