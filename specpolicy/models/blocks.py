"""Many anchor blocks of one sequence through the drafter in a single forward.

Used by training (all blocks at once under a block mask) and by exact counterfactual replay
(the draft at every anchor position, for every candidate block size). A block sees the target's
context features strictly before its anchor and itself bidirectionally, nothing from other
blocks: exactly what the drafter sees in live decoding with a cropped context cache.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from specpolicy.models.dflash import DFlashDrafter


def anchor_block_mask(anchors: torch.Tensor, block_size: int, context_length: int) -> torch.Tensor:
    """Bool attention mask [b, 1, A*B, S + A*B] (True = attend) for blocks at ``anchors`` [b, A]."""
    device = anchors.device
    n_anchor = anchors.shape[1]
    query_anchor = anchors.repeat_interleave(block_size, dim=1)  # [b, A*B]
    sees_context = torch.arange(context_length, device=device).view(1, 1, -1) < query_anchor.unsqueeze(-1)
    block_index = torch.arange(n_anchor, device=device).repeat_interleave(block_size)
    sees_block = (block_index.view(-1, 1) == block_index.view(1, -1)).expand(anchors.shape[0], -1, -1)
    return torch.cat([sees_context, sees_block], dim=-1).unsqueeze(1)


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
