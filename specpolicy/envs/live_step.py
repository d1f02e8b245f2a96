"""Live backend of ``BlockSizeStep-v0``: each episode is a :class:`~specpolicy.decoding.DecodeSession`.

The environment steps the session one cycle per action; no thread, no queue.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specpolicy.data.prompts import encode_prompt
from specpolicy.decoding import DecodeSession
from specpolicy.defaults import DEFAULT_CANDIDATES, ENV_MAX_NEW_TOKENS, ENV_MAX_SAMPLES, MAX_PROMPT_TOKENS
from specpolicy.envs.live import live_setup


class LiveStepBackend:
    """Prompts from a dataset decoded live, one decoder cycle per environment step."""

    def __init__(self, dataset: str = "sharegpt", target: str = "tiny", drafter: str = "tiny",
                 candidates: Sequence[int] = DEFAULT_CANDIDATES, max_samples: int = ENV_MAX_SAMPLES,
                 max_new_tokens: int = ENV_MAX_NEW_TOKENS,
                 temperature: float = 0.0, device: str = "cpu", pair=None) -> None:
        self.pair, self.prompts, self.decoder = live_setup(dataset, target, drafter, max_samples, max_new_tokens,
                                                           temperature, device, pair)
        self.candidates = tuple(sorted(candidates))
        self.budget = max_new_tokens

    def start(self, rng: np.random.Generator) -> tuple[DecodeSession, str]:
        """Prefill a random prompt; returns its session and the prompt's id."""
        prompt = self.prompts[int(rng.integers(len(self.prompts)))]
        ids = encode_prompt(self.pair.tokenizer, prompt, MAX_PROMPT_TOKENS)
        return self.decoder.start(ids), prompt.id
