"""One episode of an environment's source: a prompt's prefilled decode, stepped one cycle at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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
