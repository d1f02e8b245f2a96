"""Verification rules: pure tensor functions that take a draft of ``n`` tokens and the target's view of the
``n + 1`` positions after the anchor, and return the accepted drafts (0..n) and the target's next token."""

from __future__ import annotations

from typing import NamedTuple

import torch

from specpolicy.decoding.sampling import sample_with_uniforms


class VerifyResult(NamedTuple):
    """``accepted``: LongTensor [b], drafts kept; ``next_token``: LongTensor [b], the token after them."""

    accepted: torch.Tensor
    next_token: torch.Tensor


def match_verify(draft: torch.Tensor, target_tokens: torch.Tensor) -> VerifyResult:
    """Keep the longest prefix where ``draft`` [b, n] equals ``target_tokens`` [b, n + 1] (the target's
    samples: lossless for any deterministic draft)."""
    n = draft.shape[-1]
    matches = (draft == target_tokens[..., :n]).long()
    accepted = matches.cumprod(dim=-1).sum(dim=-1)
    return VerifyResult(accepted, target_tokens.gather(-1, accepted.unsqueeze(-1)).squeeze(-1))


def greedy_verify(draft: torch.Tensor, target_logits: torch.Tensor) -> VerifyResult:
    """Greedy (T = 0) verification: the target's argmax at each position. logits: [b, n + 1, V]."""
    return match_verify(draft, target_logits.argmax(dim=-1))


def speculative_sampling_verify(
    draft: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    accept_uniforms: torch.Tensor,
    resample_uniforms: torch.Tensor,
) -> VerifyResult:
    """Speculative sampling of ``draft`` [b, n] from ``draft_probs`` q [b, n, V] against ``target_probs`` p
    [b, n + 1, V]: accept with min(1, p/q), resample a rejection from max(0, p - q), else a bonus from p_n."""
    n = draft.shape[-1]
    p_draft = target_probs[..., :n, :].gather(-1, draft.unsqueeze(-1)).squeeze(-1)
    q_draft = draft_probs.gather(-1, draft.unsqueeze(-1)).squeeze(-1)
    ratio = torch.where(q_draft > 0, p_draft / q_draft.clamp_min(1e-30), torch.zeros_like(p_draft))
    accepted = (accept_uniforms < ratio).long().cumprod(dim=-1).sum(dim=-1)
    index = accepted.view(-1, 1, 1).expand(-1, 1, target_probs.shape[-1])
    p_next = target_probs.gather(-2, index).squeeze(-2)
    q_padded = torch.cat([draft_probs, torch.zeros_like(draft_probs[..., :1, :])], dim=-2)
    q_next = q_padded.gather(-2, index).squeeze(-2)
    residual = (p_next - q_next).clamp_min(0.0)
    empty = residual.sum(dim=-1, keepdim=True) <= 0
    residual = torch.where(empty, p_next, residual)
    u = resample_uniforms.gather(-1, accepted.unsqueeze(-1)).squeeze(-1)
    return VerifyResult(accepted, sample_with_uniforms(residual, u))
