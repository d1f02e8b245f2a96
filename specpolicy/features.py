"""Prefill feature extractors: logits [n, V] (and prompt lengths [n]) -> float32 policy inputs [n, d]."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

TOP_K = 8


def to_numpy(value: Any) -> np.ndarray:
    """The one crossing from tensors to numpy (no torch import): ``value`` as a host array (floating tensors
    as float32, so bfloat16 converts)."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        return (tensor.float() if tensor.is_floating_point() else tensor).numpy()
    return np.asarray(value)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def raw_logits(logits: np.ndarray, prompt_lengths: np.ndarray | None = None) -> np.ndarray:
    """The logits themselves, [n, V] (BlockPilot's input)."""
    return np.asarray(logits, dtype=np.float32)


def normalised_logits(logits: np.ndarray, prompt_lengths: np.ndarray | None = None) -> np.ndarray:
    """Per-prompt standardised logits, [n, V]."""
    logits = np.asarray(logits, dtype=np.float32)
    return (logits - logits.mean(-1, keepdims=True)) / (logits.std(-1, keepdims=True) + 1e-6)


def softmax_probs(logits: np.ndarray, prompt_lengths: np.ndarray | None = None) -> np.ndarray:
    """The target's next-token distribution, [n, V]."""
    return _softmax(np.asarray(logits, dtype=np.float64)).astype(np.float32)


def compact(logits: np.ndarray, prompt_lengths: np.ndarray | None = None) -> np.ndarray:
    """Entropy, top-8 probabilities, top-1/2 margin, max logit, logsumexp, log prompt length: [n, 13]."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1:
        logits = logits[None]
    probs = _softmax(logits)
    entropy = -(probs * np.log(probs + 1e-12)).sum(-1, keepdims=True)
    top = -np.sort(-probs, axis=-1)[:, :TOP_K]
    margin = top[:, :1] - top[:, 1:2]
    max_logit = logits.max(-1, keepdims=True)
    lse = max_logit + np.log(np.exp(logits - max_logit).sum(-1, keepdims=True))
    lengths = np.zeros((len(logits), 1)) if prompt_lengths is None else np.log1p(
        np.asarray(prompt_lengths, dtype=np.float64).reshape(-1, 1))
    return np.concatenate([entropy, top, margin, max_logit, lse, lengths], axis=-1).astype(np.float32)


EXTRACTORS: dict[str, Callable[[np.ndarray, np.ndarray | None], np.ndarray]] = {
    "logits": raw_logits,
    "normalised": normalised_logits,
    "softmax": softmax_probs,
    "compact": compact,
}


def get_extractor(name: str) -> Callable[[np.ndarray, np.ndarray | None], np.ndarray]:
    """An extractor by name: logits, normalised, softmax or compact."""
    if name not in EXTRACTORS:
        raise ValueError(f"unknown feature extractor {name!r}; use one of {', '.join(EXTRACTORS)}")
    return EXTRACTORS[name]


def with_lengths(logits: np.ndarray, prompt_lengths: np.ndarray) -> np.ndarray:
    """Logits with the prompt length appended as a last column, [n, V + 1] (the sklearn baselines' input)."""
    return np.concatenate([np.asarray(logits, dtype=np.float32),
                           np.asarray(prompt_lengths, dtype=np.float32).reshape(-1, 1)], axis=1)


def compact_from_augmented(x: np.ndarray) -> np.ndarray:
    """:func:`compact` of ``with_lengths`` input."""
    return compact(x[:, :-1], x[:, -1])


def logits_from_augmented(x: np.ndarray) -> np.ndarray:
    """The logits part of ``with_lengths`` input."""
    return x[:, :-1]
