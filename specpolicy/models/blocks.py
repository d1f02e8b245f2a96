"""Many anchor blocks of one sequence through the drafter in one forward (exact replay, drafter training): a
block sees the context strictly before its anchor and itself bidirectionally, as in live decoding."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from specpolicy.models.dflash import DFlashDrafter, DrafterCache


def block_mask(row_anchor: torch.Tensor, block_of_row: torch.Tensor, context_length: int) -> torch.Tensor:
    """Bool attention mask [b, 1, R, S + R] (True = attend): a row sees context before ``row_anchor`` [b, R]
    and every row of its block (``block_of_row`` [R])."""
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
    """Drafter hidden states [N, max(sizes), H] of blocks [anchor, mask...] at ``anchors`` [N] of ``sizes``
    [N], in one forward over the ``cache`` of ``input_ids`` [S]; block n's row k predicts anchors[n]+k."""
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
    hidden = drafter(embeddings, no_context, (row_anchor + offset).unsqueeze(0), cache,
                     attention_mask=mask)[0]
    cache.crop(seq)
    out = hidden.new_zeros(len(sizes), int(sizes.max()), hidden.shape[-1])
    out[block_of_row, offset] = hidden
    return out
