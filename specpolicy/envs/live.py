"""The live source of the environments: a random prompt of a dataset, prefilled; step environments step it a
cycle per action, the per-prompt one decodes it afresh at the chosen B (wall-clock rewards)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from specpolicy import defaults
from specpolicy.data.prompts import encode_prompt
from specpolicy.data.registry import load_prompts
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.autoregressive import own_answer
from specpolicy.envs.episode import Episode, prompt_index
from specpolicy.envs.replay_data import prompt_features
from specpolicy.features import to_numpy

if TYPE_CHECKING:
    from specpolicy.models import ModelPair


class LiveSource:
    """The live source: prompts of ``dataset`` decoded by the pair; ``outcome``: ``reward``, decoded anew."""

    kind = "live"
    latency = None  # rewards are measured, not priced

    def __init__(self, dataset: str = "sharegpt", target: str = "tiny", drafter: str = "tiny",
                 candidates: Sequence[int] = defaults.DEFAULT_CANDIDATES, max_samples: int =
                 defaults.ENV_MAX_SAMPLES, max_new_tokens: int = defaults.ENV_MAX_NEW_TOKENS,
                 temperature: float = 0.0, device: str = "cpu", pair: ModelPair | None = None,
                 features: str = "logits", reward: str = "tau", cost_weight: float = defaults.COST_WEIGHT,
                 ) -> None:
        from specpolicy.models import load_pair

        self.pair = pair or load_pair(target, drafter, "auto", device)
        self.decoder = SpeculativeDecoder(self.pair.target, self.pair.drafter, temperature=temperature,
                                          max_new_tokens=max_new_tokens)
        self.prompts = load_prompts(dataset, max_samples)
        self.answer = own_answer(self.decoder)  # multi-turn prompts continue after the target's own answers
        self.candidates = tuple(sorted(candidates))
        self.budget = max_new_tokens
        self.features, self.reward, self.cost_weight = features, reward, cost_weight

    @property
    def observation_size(self) -> int:
        return len(self.episode(np.random.default_rng(0)).observation)

    def episode(self, rng: np.random.Generator, index: int | None = None) -> Episode:
        """Prefill prompt ``index`` (default: a random one) in a fresh decode session."""
        prompt = self.prompts[prompt_index(rng, index, len(self.prompts))]
        ids = encode_prompt(self.pair.tokenizer, prompt, defaults.MAX_PROMPT_TOKENS, self.answer)
        session = self.decoder.start(ids)
        logits = to_numpy(session.state.prefill_logits)[None]
        observation = prompt_features(self.features, logits, np.array([session.state.prompt_length]))[0]
        return Episode(session, prompt.id, self.budget, observation, ids=ids)

    def outcome(self, episode: Episode, action: int) -> tuple[float, dict]:
        """Decode the episode's prompt afresh at candidate ``action``: the measured reward and the info."""
        size = self.candidates[action]
        trace = self.decoder.generate(episode.ids, size)
        rewards = {"tau": trace.tau, "cost": trace.tau - self.cost_weight * (size - 1),
                   "time": trace.tokens_per_second}
        return rewards[self.reward], {"block_size": size, "accepted": [c.accepted for c in trace.cycles],
                                      "tau": trace.tau, "decode_seconds": trace.decode_seconds,
                                      "prompt_id": episode.prompt_id}
