"""The DFlash training objective: many anchor blocks of a sequence in one drafter forward.

Every block is an anchor token followed by B-1 mask tokens. A block sees the target's context
features strictly before its anchor and itself bidirectionally, nothing from other blocks. Block
position k = 1..B-1 predicts the token at anchor + k, weighted by exp(-(k-1)/gamma).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from specpolicy.models.blocks import block_mask
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.target import new_cache, target_forward

DEFAULT_GAMMA = {16: 7.0, 10: 5.0, 8: 4.0}


def anchor_block_mask(anchors: torch.Tensor, block_size: int, context_length: int) -> torch.Tensor:
    """Bool attention mask [b, 1, A*B, S + A*B] (True = attend) for blocks at ``anchors`` [b, A]."""
    block_index = torch.arange(anchors.shape[1], device=anchors.device).repeat_interleave(block_size)
    return block_mask(anchors.repeat_interleave(block_size, dim=1), block_index, context_length)


def draft_anchor_blocks(
    drafter: DFlashDrafter,
    target: PreTrainedModel,
    input_ids: torch.Tensor,
    context: torch.Tensor,
    anchors: torch.Tensor,
    block_size: int,
) -> torch.Tensor:
    """Drafter hidden states of the blocks at ``anchors``.

    Args:
        input_ids: [b, S] token ids; the anchor token is read from here.
        context: target features the drafter reads, [b, S, L*H] (only positions < anchor are seen).
        anchors: [b, A] anchor positions.
    Returns:
        [b, A, B, H]; position k of a block (k >= 1) predicts the token at anchor + k.
    """
    b, seq = input_ids.shape
    device = input_ids.device
    offsets = torch.arange(block_size, device=device)
    block_pos = anchors.unsqueeze(-1) + offsets  # [b, A, B]
    block_ids = torch.full_like(block_pos, drafter.mask_token_id)
    block_ids[..., 0] = input_ids.gather(1, anchors)
    block_emb = target.get_input_embeddings()(block_ids.view(b, -1))  # [b, A*B, H]
    positions = torch.cat([torch.arange(seq, device=device).expand(b, seq), block_pos.view(b, -1)], dim=1)
    mask = anchor_block_mask(anchors, block_size, seq)
    hidden = drafter(block_emb, context, positions, cache=None, attention_mask=mask)
    return hidden.view(b, anchors.shape[1], block_size, -1)


def sample_anchors(
    lengths: torch.Tensor, first: torch.Tensor, block_size: int, count: int, generator: torch.Generator
) -> torch.Tensor:
    """Random anchor positions with room for a full block.

    Args:
        lengths: [b] valid tokens per row. first: [b] first allowed anchor per row (response start).
    Returns:
        LongTensor [b, count] of positions p with first <= p <= length - block_size (repeats allowed).
    """
    low = first.float()
    high = (lengths - block_size).clamp_min(first).float()
    u = torch.rand(len(lengths), count, generator=generator)
    drawn = (low.unsqueeze(1) + u * (high - low + 1).unsqueeze(1)).floor().long()
    return drawn.clamp(max=high.long().unsqueeze(1))


@torch.no_grad()
def target_context(target: PreTrainedModel, drafter: DFlashDrafter, input_ids: torch.Tensor) -> torch.Tensor:
    """Teacher-forced target features the drafter reads: [b, S, L*H]."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
    _, hidden = target_forward(target, input_ids, positions, new_cache(target), logits_to_keep=1)
    return drafter.context_features(hidden)


def dflash_loss(
    drafter: DFlashDrafter,
    target: PreTrainedModel,
    input_ids: torch.Tensor,
    anchors: torch.Tensor,
    block_size: int,
    gamma: float | None = None,
    context: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted cross-entropy of the drafter on anchor blocks.

    Args:
        input_ids: [b, S] token ids (prompt + target response). anchors: [b, A] anchor positions,
            each with ``anchor + block_size <= S``. context: precomputed :func:`target_context`.
    Returns:
        (loss scalar, per-position accuracy [B-1] of the argmax drafts, for monitoring)
    """
    b, n_anchor = anchors.shape
    gamma = gamma if gamma is not None else DEFAULT_GAMMA.get(block_size, block_size / 2.3)
    if context is None:
        context = target_context(target, drafter, input_ids)
    offsets = torch.arange(block_size, device=input_ids.device)
    label_pos = (anchors.unsqueeze(-1) + offsets[1:]).view(b, -1)
    labels = input_ids.gather(1, label_pos).view(b, n_anchor, block_size - 1)
    hidden = draft_anchor_blocks(drafter, target, input_ids, context, anchors, block_size)[:, :, 1:]
    logits = target.get_output_embeddings()(hidden).float()  # [b, A, B-1, V]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    weights = torch.exp(-(offsets[1:].float() - 1) / gamma)
    ce = ce.view(b, n_anchor, block_size - 1) * weights
    loss = ce.sum() / (weights.sum() * b * n_anchor)
    accuracy = (logits.argmax(-1) == labels).float().mean(dim=(0, 1))
    return loss, accuracy
