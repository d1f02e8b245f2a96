"""One episode of an environment's source: a prompt's prefilled decode, stepped one cycle at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specpolicy.arguments import is_integer


@dataclass
class Episode:
    """One prompt, prefilled: its decode ``session`` (a ReplaySession or a DecodeSession), id, token
    budget, prefill ``observation`` [d] (the source's features), and the replay row or the live token ids."""

    session: Any
    prompt_id: str
    budget: int
    observation: np.ndarray
    index: int | None = None
    ids: list[int] | None = None


def prompt_index(rng: np.random.Generator, index: object, count: int) -> int:
    """The prompt an episode decodes: ``index`` checked to lie in 0..``count`` - 1, or a random one (None)."""
    if index is None:
        return int(rng.integers(count))
    if not is_integer(index) or not 0 <= int(index) < count:
        raise ValueError(f"options['prompt_index'] must be an integer in 0..{count - 1} (the source's "
                         f"prompts), got {index!r}")
    return int(index)
