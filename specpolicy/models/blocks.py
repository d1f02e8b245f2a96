"""Many anchor blocks of one sequence through the drafter in a single forward.

Used by exact counterfactual replay (the draft at every reachable anchor, for every candidate block
size, over one shared context cache) and by the zoo's drafter training (``zoo_build.drafter_loss``,
all blocks at once under the same mask). A block sees the target's context features strictly before
its anchor and itself bidirectionally, nothing from other blocks: exactly what the drafter sees in
live decoding with a cropped context cache.
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
