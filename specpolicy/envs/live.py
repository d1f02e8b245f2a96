"""Live backend of the environments: decode prompts with the target and drafter (wall-clock rewards)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specpolicy.arrays import to_numpy
from specpolicy.data.prompts import Prompt, encode_prompt
from specpolicy.data.registry import load_prompts
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.defaults import COST_WEIGHT, DEFAULT_CANDIDATES, ENV_MAX_NEW_TOKENS, ENV_MAX_SAMPLES, MAX_PROMPT_TOKENS
from specpolicy.envs.replay_data import OBSERVATION_BOUND
from specpolicy.features import get_extractor

if TYPE_CHECKING:
    from specpolicy.models import ModelPair


def live_setup(dataset: str, target: str, drafter: str, max_samples: int, max_new_tokens: int,
               temperature: float, device: str, pair=None) -> tuple[ModelPair, list[Prompt], SpeculativeDecoder]:
    """The model pair (loaded unless given), the prompts and the decoder a live environment drives."""
    from specpolicy.models import load_pair

    pair = pair or load_pair(target, drafter, "auto", device)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature, max_new_tokens=max_new_tokens)
    return pair, load_prompts(dataset, max_samples), decoder


class LiveBackend:
    """Prompts from a dataset, decoded at the chosen block size; observations from a prefill pass."""

    def __init__(self, dataset: str = "sharegpt", target: str = "tiny", drafter: str = "tiny",
                 candidates=DEFAULT_CANDIDATES, max_samples: int = ENV_MAX_SAMPLES,
                 max_new_tokens: int = ENV_MAX_NEW_TOKENS,
                 temperature: float = 0.0, device: str = "cpu", features: str = "logits", reward: str = "tau",
                 cost_weight: float = COST_WEIGHT, pair=None) -> None:
        self.pair, self.prompts, self.decoder = live_setup(dataset, target, drafter, max_samples, max_new_tokens,
                                                           temperature, device, pair)
        self.candidates = tuple(sorted(candidates))
        self.extract = get_extractor(features)
        self.reward, self.cost_weight = reward, cost_weight
        self._ids: list[int] = []
        first = encode_prompt(self.pair.tokenizer, self.prompts[0], MAX_PROMPT_TOKENS)
        self.observation_size = self._observe(first).shape[0]

    def _observe(self, ids: list[int]) -> np.ndarray:
        trace = self.decoder.generate(ids, 1, max_new_tokens=1)  # prefill only
        features = self.extract(to_numpy(trace.prefill_logits)[None], np.array([len(ids)]))[0]
        return np.clip(features, -OBSERVATION_BOUND, OBSERVATION_BOUND).astype(np.float32)

    def reset(self, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
        prompt = self.prompts[int(rng.integers(len(self.prompts)))]
        self._ids = encode_prompt(self.pair.tokenizer, prompt, MAX_PROMPT_TOKENS)
        self._prompt_id = prompt.id
        return self._observe(self._ids), {"prompt_id": prompt.id}

    def step(self, block_size: int) -> tuple[float, dict]:
        trace = self.decoder.generate(self._ids, block_size)
        rewards = {"tau": trace.tau, "cost": trace.tau - self.cost_weight * (block_size - 1),
                   "time": trace.tokens_per_second}
        reward = rewards[self.reward]  # checked by the environment before the models loaded
        return reward, {"block_size": block_size, "accepted": [c.accepted for c in trace.cycles], "tau": trace.tau,
                        "prompt_id": self._prompt_id, "decode_seconds": trace.decode_seconds}
