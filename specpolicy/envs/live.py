"""The live source of the environments: prompts from a dataset, decoded with the target and drafter.

Every episode starts a :class:`~specpolicy.decoding.DecodeSession` of a random prompt (prefill done):
the step environments step it one cycle per action; the per-prompt environment observes its prefill
and, after the action, decodes the prompt afresh at the chosen block size (its rewards are wall-clock
measured, so the agent's own time between reset and step never counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from specpolicy.data.prompts import encode_prompt
from specpolicy.data.registry import load_prompts
from specpolicy.decoding import DecodeSession, SpeculativeDecoder
from specpolicy.decoding.autoregressive import own_answer
from specpolicy.defaults import DEFAULT_CANDIDATES, ENV_MAX_NEW_TOKENS, ENV_MAX_SAMPLES, MAX_PROMPT_TOKENS

if TYPE_CHECKING:
    from specpolicy.models import ModelPair


class LiveSource:
    """Prompts from ``dataset`` decoded live by the target and drafter (loaded unless ``pair`` is given)."""

    def __init__(self, dataset: str = "sharegpt", target: str = "tiny", drafter: str = "tiny",
                 candidates: Sequence[int] = DEFAULT_CANDIDATES, max_samples: int = ENV_MAX_SAMPLES,
                 max_new_tokens: int = ENV_MAX_NEW_TOKENS, temperature: float = 0.0, device: str = "cpu",
                 pair: ModelPair | None = None) -> None:
        from specpolicy.models import load_pair

        self.pair = pair or load_pair(target, drafter, "auto", device)
        self.decoder = SpeculativeDecoder(self.pair.target, self.pair.drafter, temperature=temperature,
                                          max_new_tokens=max_new_tokens)
        self.prompts = load_prompts(dataset, max_samples)
        self.answer = own_answer(self.decoder)  # multi-turn prompts continue after the target's own answers
        self.candidates = tuple(sorted(candidates))
        self.budget = max_new_tokens

    def start(self, rng: np.random.Generator) -> tuple[DecodeSession, str, list[int]]:
        """Prefill a random prompt: its session, the prompt's id and its token ids."""
        prompt = self.prompts[int(rng.integers(len(self.prompts)))]
        ids = encode_prompt(self.pair.tokenizer, prompt, MAX_PROMPT_TOKENS, self.answer)
        return self.decoder.start(ids), prompt.id, ids
