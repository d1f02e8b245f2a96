"""Prompts with ids, rendered through a tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Prompt:
    """One prompt: chat ``messages`` ending with a user turn, ``category`` / ``group`` (``compare --by``),
    ``own_answers`` (earlier turns answered by the target first), ``conversation`` (never split apart)."""

    id: str
    messages: tuple[tuple[str, str], ...]
    category: str = ""
    group: str = ""
    own_answers: bool = False
    conversation: str = ""

    def __post_init__(self) -> None:
        if not self.conversation:
            object.__setattr__(self, "conversation", self.id)
        if self.category and not self.group:
            object.__setattr__(self, "group", self.category)

    @classmethod
    def single(cls, id: str, text: str, category: str = "", group: str = "",
               conversation: str = "") -> Prompt:
        return cls(id, (("user", text),), category, group, conversation=conversation)


def with_own_answers(prompt: Prompt, answer: Callable[[Prompt], str]) -> Prompt:
    """``prompt`` with the target's answer after every user turn but the last (``answer(conversation so far)``
    decodes one); prompts without ``own_answers`` come back unchanged."""
    if not prompt.own_answers:
        return prompt
    messages: list[tuple[str, str]] = []
    for role, text in prompt.messages:
        if role == "user" and messages and messages[-1][0] == "user":
            messages.append(("assistant",
                             answer(replace(prompt, messages=tuple(messages), own_answers=False))))
        messages.append((role, text))
    return replace(prompt, messages=tuple(messages), own_answers=False)


Answer = Callable[[list[int]], Sequence[int]]
"""the target's answer to a conversation: prompt ids -> output ids (e.g. a plain decode)"""


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, max_tokens: int | None = None,
                  answer: Answer | None = None) -> list[int]:
    """Token ids of ``prompt`` through the chat template (generation prompt, thinking off); ``max_tokens``
    keeps the last tokens; a prompt with ``own_answers`` needs ``answer``."""
    if prompt.own_answers:
        if answer is None:
            raise ValueError(f"prompt {prompt.id!r} continues a conversation after the target's own "
                             "answers, which this command does not decode; sweep it (`specpolicy sweep`) "
                             "or compare it")
        prompt = with_own_answers(prompt, lambda earlier: tokenizer.decode(
            list(answer(encode_prompt(tokenizer, earlier, max_tokens))), skip_special_tokens=True))
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


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt],
                   max_tokens: int | None = None, answer: Answer | None = None) -> list[list[int]]:
    """:func:`encode_prompt` for each prompt."""
    return [encode_prompt(tokenizer, p, max_tokens, answer) for p in prompts]
