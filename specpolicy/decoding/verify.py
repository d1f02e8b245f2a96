"""Verification rules: pure tensor functions that decide how much of a draft to keep.

Every rule takes a draft of ``n`` tokens (the block minus its anchor) and the target's view of the
``n + 1`` positions after the anchor, and returns how many drafts are accepted (0..n) and the
target's token that follows them (the correction at the first mismatch, or the bonus token).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from specpolicy.decoding.sampling import sample_with_uniforms


class VerifyResult(NamedTuple):
    """``accepted``: LongTensor [b], drafts kept; ``next_token``: LongTensor [b], the token after them."""

    accepted: torch.Tensor
    next_token: torch.Tensor


def match_verify(draft: torch.Tensor, target_tokens: torch.Tensor) -> VerifyResult:
    """Keep the longest prefix where the draft equals the target's own tokens.

    With ``target_tokens`` the target's samples this is lossless for any deterministic draft.

    Args:
        draft: LongTensor [b, n]. target_tokens: LongTensor [b, n + 1], the target's token at each position.

    >>> match_verify(torch.tensor([[5, 6, 7]]), torch.tensor([[5, 6, 9, 1]]))
    VerifyResult(accepted=tensor([2]), next_token=tensor([9]))
    """
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
    """Standard speculative sampling for drafts sampled from the drafter's distribution ``q``.

    Draft ``i`` is accepted with probability min(1, p_i(d_i) / q_i(d_i)); at the first rejection the
    token is resampled from the normalised residual max(0, p - q); after a full accept the bonus
    token is drawn from p_n. The emitted tokens are distributed exactly as the target's.

    Args:
        draft: [b, n]. draft_probs: q, [b, n, V]. target_probs: p, [b, n + 1, V].
        accept_uniforms: [b, n]. resample_uniforms: [b, n + 1] (only the used position matters).
    """
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
