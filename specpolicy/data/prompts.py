"""Prompts with ids, rendered through a tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Prompt:
    """One prompt: ``messages`` are chat turns ending with a user turn."""

    id: str
    messages: tuple[tuple[str, str], ...]

    @classmethod
    def single(cls, id: str, text: str) -> Prompt:
        return cls(id, (("user", text),))


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, max_tokens: int | None = None) -> list[int]:
    """Token ids of ``prompt`` through the chat template (generation prompt added, thinking off).

    ``max_tokens`` keeps the last tokens of a longer prompt (the generation prompt survives).
    """
    messages = [{"role": role, "content": text} for role, text in prompt.messages]
    if getattr(tokenizer, "chat_template", None):
        try:
            text = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
            )
        except TypeError:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer("\n\n".join(t for _, t in prompt.messages))["input_ids"]
    if max_tokens is not None and len(ids) > max_tokens:
        ids = ids[-max_tokens:]
    return list(ids)


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt], max_tokens: int | None = None
) -> list[list[int]]:
    """:func:`encode_prompt` for each prompt."""
    return [encode_prompt(tokenizer, p, max_tokens) for p in prompts]
