"""Thin adapter over a Hugging Face causal LM: forward with a KV cache, cache cropping (4.x and 5.x)."""

from __future__ import annotations

import inspect
from functools import lru_cache

import torch
from transformers import DynamicCache, PreTrainedModel


@lru_cache(maxsize=32)
def cache_kwarg(forward_cls: type) -> str:
    """The name ``forward_cls.forward`` takes its KV cache by: ``cache`` (>= 5.x) or ``past_key_values``."""
    params = inspect.signature(forward_cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """An empty dynamic KV cache for ``model``."""
    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x
        return DynamicCache()


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of ``cache``."""
    extra = cache.get_seq_length() - length
    if extra <= 0:
        return
    cache.crop(-extra)  # a negative count removes that many tokens in transformers 4.x and 5.x alike


def target_forward(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    cache: DynamicCache,
    logits_to_keep: int = 0,
    hidden_states: bool = True,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """Run the target on ``input_ids`` / ``position_ids`` [b, s], extending ``cache`` -> logits [b, s or
    logits_to_keep, V] and, with ``hidden_states``, every layer's [b, s, H] (0: embeddings), else ``None``."""
    kwargs = {cache_kwarg(type(model)): cache}
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        use_cache=True,
        output_hidden_states=hidden_states,
        logits_to_keep=logits_to_keep,
        **kwargs,
    )
    return out.logits, (out.hidden_states if hidden_states else None)
