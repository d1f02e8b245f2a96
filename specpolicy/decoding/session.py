"""One prompt's speculative decode, a cycle per :meth:`DecodeSession.step`; ``decode_seconds`` counts the time
a caller spends choosing between cycles, as in deployment."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch

from specpolicy.arguments import check_block_size, check_verify_length
from specpolicy.cycles import CycleRecord
from specpolicy.decoding.sampling import PositionalUniforms, draft_confidences
from specpolicy.decoding.trace import DecodeTrace
from specpolicy.models.target import crop_cache, new_cache, target_forward
from specpolicy.state import DecodeState, DraftedBlock, commit_tokens, context_cap


class DecoderParts(Protocol):
    """What a session uses of the :class:`~specpolicy.decoding.decoder.SpeculativeDecoder` that starts it: the
    decoder builds sessions; sessions know the decoder only by this shape (one arrow: decoder -> session)."""

    target: Any
    drafter: Any
    device: torch.device
    embed: Any
    lm_head: Any
    temperature: float
    stop_token_ids: list[int]
    max_positions: int | None
    record_confidences: bool

    def sync(self) -> None: ...
    def budget(self, max_new_tokens: int | None) -> int: ...
    def check_prompt(self, prompt_ids: Sequence[int] | torch.Tensor) -> torch.Tensor: ...
    def target_tokens(self, logits: torch.Tensor, uniforms: Any, first_pos: int) -> torch.Tensor: ...
    def draft_tokens(self, logits: torch.Tensor, uniforms: Any,
                     first_pos: int) -> tuple[torch.Tensor, Any]: ...
    def verify(self, draft: torch.Tensor, draft_probs: Any, logits: torch.Tensor, uniforms: Any,
               first_pos: int ) -> Any: ...


def prefill(decoder: DecoderParts, ids: torch.Tensor, uniforms: PositionalUniforms | None,
            hidden_states: bool = True) -> tuple[object, torch.Tensor, tuple | None, int, float]:
    """1. Prefill ``ids`` [s] into a new cache -> (cache, last logits [V] float32, hidden states if asked, the
    first token, seconds); shared by speculative and plain decoding."""
    decoder.sync()
    t0 = time.perf_counter()
    cache = new_cache(decoder.target)
    prompt_len = ids.numel()
    positions = torch.arange(prompt_len, device=decoder.device).unsqueeze(0)
    logits, hidden = target_forward(decoder.target, ids.to(decoder.device).unsqueeze(0), positions, cache,
                                    logits_to_keep=1, hidden_states=hidden_states)
    first = int(decoder.target_tokens(logits[0, -1:], uniforms, prompt_len)[0])
    decoder.sync()
    return cache, logits[0, -1].float(), hidden, first, time.perf_counter() - t0


@dataclass
class _Drafted:
    """A drafted block awaiting :meth:`DecodeSession.verify`: drafts [B-1], their probs [B-1, V]."""

    requested: int
    size: int
    start: int
    draft: torch.Tensor
    probs: torch.Tensor | None
    seconds: float


class DecodeSession:
    """A decode in progress (batch size 1), from :meth:`SpeculativeDecoder.start`: ``state`` (what a per-cycle
    policy reads next), ``done``, ``output`` (committed ids, prefill token first), ``cycles`` (records)."""

    @torch.inference_mode()
    def __init__(self, decoder: DecoderParts, prompt_ids: Sequence[int] | torch.Tensor, *,
                 max_new_tokens: int | None = None, seed: int = 0) -> None:
        self.decoder = decoder
        self.ids = decoder.check_prompt(prompt_ids)
        self.budget = decoder.budget(max_new_tokens)
        self.uniforms = PositionalUniforms(seed, decoder.device) if decoder.temperature > 0 else None
        self.stops = set(decoder.stop_token_ids)
        self.cycles: list[CycleRecord] = []
        self.confidences: list[list[float]] = []  # per drafted block: top-1 probability of each draft [B - 1]
        self.entropies: list[list[float]] = []  # per drafted block: entropy (nats) of each draft position
        self._drafted: _Drafted | None = None
        self._prefill()

    def _prefill(self) -> None:
        """1. Prefill: the target reads the prompt [s] and emits the first output token."""
        decoder = self.decoder
        self.cache, logits, hidden, first, self.prefill_seconds = prefill(decoder, self.ids, self.uniforms)
        self.prefill_logits = logits
        # context not yet drafted on: [1, c, L*H] each
        self.pending = [decoder.drafter.context_features(hidden)]
        self.drafter_cache = decoder.drafter.new_cache()
        self.output = [first]
        self.stop_reason = ("stop_token" if first in self.stops
                            else "max_new_tokens" if self.budget <= 1 else "")
        self.state = DecodeState.after_prefill(self.prefill_logits, self.ids.numel())
        self._t_loop = time.perf_counter()
        self._t_end = self._t_loop

    @property
    def done(self) -> bool:
        return bool(self.stop_reason)

    @torch.inference_mode()
    def step(self, block_size: int, length: int | None = None) -> CycleRecord:
        """2-6. One cycle of ``block_size`` verifying ``length`` tokens (default the block); at the context
        limit it verifies the positions left (:func:`~specpolicy.state.context_cap`); with none, it ends."""
        block = self._draft_block(block_size, record=False)
        return self.verify(length if block.block_size else None)

    @torch.inference_mode()
    def draft(self, block_size: int) -> DraftedBlock:
        """2-3. The first half of a cycle: draft ``block_size`` at the current anchor, with the drafts'
        confidences and entropies; :meth:`verify` finishes the cycle (time between the two counts)."""
        return self._draft_block(block_size, record=True)

    @torch.inference_mode()
    def verify(self, length: int | None = None) -> CycleRecord:
        """4-6. The second half: verify the anchor + ``length - 1`` drafts of the drafted block (default:
        all of it; a longer length is capped at the block), commit, and return the cycle's record."""
        if self._drafted is None:
            raise RuntimeError("no drafted block to verify: call draft(block_size) first")
        drafted, self._drafted = self._drafted, None
        if not drafted.size:
            return self._finish(CycleRecord(drafted.requested, 0, 0), "context")
        length = check_verify_length(length, drafted.size, cap=True)
        draft = drafted.draft[: length - 1]
        draft_probs = None if drafted.probs is None else drafted.probs[: length - 1]
        accepted, next_token, verify_seconds = self._verify(drafted.start, length, draft, draft_probs)
        # 5. Commit accepted drafts + the target's next token; 6. stop on a stop token or the budget.
        new_tokens = [*draft.view(-1)[:accepted].tolist(), next_token]
        new_tokens, reason = commit_tokens(new_tokens, self.stops, self.budget - len(self.output))
        self.output.extend(new_tokens)
        cycle = CycleRecord(drafted.requested, accepted, len(new_tokens), drafted.seconds, verify_seconds,
                            length if length < drafted.requested else 0)  # a context cap is a verify length
        return self._finish(cycle, reason)

    def _draft_block(self, block_size: int, record: bool) -> DraftedBlock:
        """Check the request, cap it at the context left, draft it and keep it for :meth:`verify`."""
        if self.done:
            raise RuntimeError(f"the decode has ended ({self.stop_reason}); start a new one")
        if self._drafted is not None:
            raise RuntimeError("a drafted block is waiting: call verify(length) before drafting another")
        requested = check_block_size(block_size)
        start = self.state.position  # the anchor: the last committed token, not yet read by the target
        size = context_cap(requested, start, self.decoder.max_positions)
        if size < 1:
            self._drafted = _Drafted(requested, 0, start, torch.empty(0), None, 0.0)
            return DraftedBlock(0)
        draft, probs, seconds, block = self._draft(start, size, record)
        self._drafted = _Drafted(requested, size, start, draft, probs, seconds)
        return replace(block, block_size=requested)  # the policy's B; the drafts the context had room for

    def _finish(self, cycle: CycleRecord, reason: str) -> CycleRecord:
        if cycle.committed:
            self.cycles.append(cycle)
        self.stop_reason = reason
        self.state.advance(cycle, len(self.output))
        self.decoder.sync()
        self._t_end = time.perf_counter()
        return cycle

    def _draft(self, start: int, size: int, record: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None, float, DraftedBlock]:
        """3. Draft: one drafter pass over [anchor, mask * (B-1)] -> drafts [B-1], their probs [B-1, V] when
        sampled, seconds and the block's record (with confidences and entropies when recording)."""
        decoder, device = self.decoder, self.decoder.device
        if size == 1:
            return torch.empty(0, dtype=torch.long, device=device), None, 0.0, DraftedBlock(1)
        decoder.sync()
        t0 = time.perf_counter()
        block = torch.full((1, size), decoder.drafter.mask_token_id, device=device)
        block[0, 0] = self.output[-1]
        positions = torch.arange(len(self.drafter_cache), start + size, device=device).unsqueeze(0)
        context = self.pending[0] if len(self.pending) == 1 else torch.cat(self.pending, dim=1)
        hidden = decoder.drafter(decoder.embed(block), context, positions, self.drafter_cache)
        draft_logits = decoder.lm_head(hidden[:, 1:, :])
        self.drafter_cache.crop(start)  # the block's own keys/values never persist
        self.pending = []
        decoder.sync()
        seconds = time.perf_counter() - t0
        draft, probs = decoder.draft_tokens(draft_logits[0], self.uniforms, start + 1)
        if not (record or decoder.record_confidences):
            return draft, probs, seconds, DraftedBlock(size)
        confidence, entropy = draft_confidences(draft_logits[0], draft)
        self.confidences.append(confidence)
        self.entropies.append(entropy)
        return draft, probs, seconds, DraftedBlock(size, tuple(confidence), tuple(entropy))

    def _verify(self, start: int, size: int, draft: torch.Tensor, draft_probs: torch.Tensor | None
                ) -> tuple[int, int, float]:
        """4. Verify: the target reads anchor + drafts [B] in one forward; (accepted, next token, seconds)."""
        decoder, device = self.decoder, self.decoder.device
        decoder.sync()
        t0 = time.perf_counter()
        block_ids = torch.cat([torch.tensor([[self.output[-1]]], device=device), draft.view(1, -1)], dim=1)
        positions = torch.arange(start, start + size, device=device).unsqueeze(0)
        logits, hidden = target_forward(decoder.target, block_ids, positions, self.cache)
        decoder.sync()
        seconds = time.perf_counter() - t0
        result = decoder.verify(draft.view(1, -1), draft_probs, logits[0], self.uniforms, start + 1)
        accepted = int(result.accepted[0])
        crop_cache(self.cache, start + accepted + 1)
        self.pending.append(decoder.drafter.context_features(hidden)[:, : accepted + 1])
        return accepted, int(result.next_token[0]), seconds

    def trace(self) -> DecodeTrace:
        """What the decode did so far (final once :attr:`done`)."""
        return DecodeTrace(self.ids.tolist(), list(self.output), list(self.cycles), self.prefill_seconds,
                           self._t_end - self._t_loop, self.stop_reason, self.prefill_logits.cpu(),
                           list(self.confidences))
