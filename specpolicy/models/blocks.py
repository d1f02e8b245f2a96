"""Many anchor blocks of one sequence through the drafter in a single forward.

Used by training (all blocks at once under a block mask) and by exact counterfactual replay
(the draft at every reachable anchor, for every candidate block size, over one shared context
cache). A block sees the target's context features strictly before its anchor and itself
bidirectionally, nothing from other blocks: exactly what the drafter sees in live decoding with a
cropped context cache.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from specpolicy.models.dflash import DFlashDrafter, DrafterCache


def block_mask(row_anchor: torch.Tensor, block_of_row: torch.Tensor, context_length: int) -> torch.Tensor:
    """Bool attention mask [b, 1, R, S + R] (True = attend) for R block rows over S context positions.

    Args:
        row_anchor: [b, R] the anchor position of each row's block: the row sees context before it.
        block_of_row: [R] the block each row belongs to: the row sees every row of its own block.
    """
    device = row_anchor.device
    sees_context = torch.arange(context_length, device=device).view(1, 1, -1) < row_anchor.unsqueeze(-1)
    sees_block = (block_of_row.view(-1, 1) == block_of_row.view(1, -1)).expand(row_anchor.shape[0], -1, -1)
    return torch.cat([sees_context, sees_block], dim=-1).unsqueeze(1)


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


def draft_mixed_blocks(
    drafter: DFlashDrafter,
    target: PreTrainedModel,
    input_ids: torch.Tensor,
    cache: DrafterCache,
    anchors: torch.Tensor,
    sizes: torch.Tensor,
) -> torch.Tensor:
    """Drafter hidden states of blocks of different sizes in one forward, over a shared context cache.

    Block ``n`` is [anchor token, mask * (sizes[n] - 1)] at positions ``anchors[n] ..``; it sees the
    cached context strictly before its anchor and itself bidirectionally, as in live decoding.

    Args:
        input_ids: [S] token ids of the sequence (the anchor token is read from here).
        cache: the drafter's context cache of the whole sequence (length S, from
            :meth:`DFlashDrafter.cache_context`; left as it was).
        anchors: LongTensor [N], the anchor position of each block.
        sizes: LongTensor [N], the size of each block.
    Returns:
        [N, max(sizes), H]; row k < sizes[n] of block n predicts the token at anchors[n] + k (rest is zero).
    """
    device = input_ids.device
    seq = len(cache)
    block_of_row = torch.repeat_interleave(torch.arange(len(sizes), device=device), sizes)  # [R]
    starts = torch.cumsum(sizes, 0) - sizes
    offset = torch.arange(len(block_of_row), device=device) - starts[block_of_row]
    row_anchor = anchors[block_of_row]
    ids = torch.where(offset == 0, input_ids[row_anchor], torch.full_like(row_anchor, drafter.mask_token_id))
    mask = block_mask(row_anchor.unsqueeze(0), block_of_row, seq)  # [1, 1, R, S + R]
    embeddings = target.get_input_embeddings()(ids).unsqueeze(0)  # [1, R, H]
    no_context = embeddings.new_zeros(1, 0, drafter.fc.in_features)
    hidden = drafter(embeddings, no_context, (row_anchor + offset).unsqueeze(0), cache, attention_mask=mask)[0]
    cache.crop(seq)
    out = hidden.new_zeros(len(sizes), int(sizes.max()), hidden.shape[-1])
    out[block_of_row, offset] = hidden
    return out
