"""Token streams of ShareGPT chats for training the tiny zoo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerBase

from specpolicy.data.sharegpt import Conversation


def chat_messages(conversation: Conversation) -> list[dict[str, str]]:
    """The conversation as ``[{"role": ..., "content": ...}, ...]`` for a chat template."""
    return [{"role": role, "content": text} for role, text in conversation.turns]


def chat_text(tokenizer: PreTrainedTokenizerBase, conversation: Conversation) -> str:
    """The whole conversation rendered with the tokenizer's chat template."""
    return tokenizer.apply_chat_template(chat_messages(conversation), tokenize=False)


def token_stream(
    tokenizer: PreTrainedTokenizerBase, conversations: list[Conversation], cache: Path | None = None
) -> np.ndarray:
    """Concatenated token ids of all conversations, separated by the pad (end-of-text) token.

    Returns:
        uint16 array of shape [total_tokens]. Cached at ``cache`` (``.npy``) when given.
    """
    if cache is not None and cache.exists():
        return np.load(cache)
    texts = [chat_text(tokenizer, c) for c in conversations]
    separator = tokenizer.pad_token_id
    ids: list[int] = []
    for start in range(0, len(texts), 512):
        for row in tokenizer(texts[start : start + 512], add_special_tokens=False)["input_ids"]:
            ids.extend(row)
            ids.append(separator)
    stream = np.asarray(ids, dtype=np.uint16)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, stream)
    return stream
