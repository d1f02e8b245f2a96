"""Environment benchmark: vectorised replay steps/s, and the live env's overhead over a bare decode."""

from __future__ import annotations

import time

import numpy as np

from benchmarks import ENV_LIVE_EPISODES, ENV_NUM_ENVS, ENV_STEPS
from specpolicy.defaults import ENV_MAX_NEW_TOKENS, TRAINING_BLOCK_SIZE


def vector_steps_per_second(sweep: str | None, num_envs: int = ENV_NUM_ENVS, steps: int = ENV_STEPS) -> float:
    """Environment steps per second of the vectorised replay BlockSize-v0 (random actions)."""
    import gymnasium as gym

    import specpolicy  # noqa: F401

    envs = gym.make_vec("specpolicy/BlockSize-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                        **({"sweep": sweep} if sweep else {}))
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(envs.single_action_space.n, size=(steps, num_envs))
    start = time.perf_counter()
    for row in actions:
        envs.step(row)
    return steps * num_envs / (time.perf_counter() - start)


def live_env_overhead(pair, dataset: str, episodes: int = ENV_LIVE_EPISODES,
                      max_new_tokens: int = ENV_MAX_NEW_TOKENS) -> tuple[float, float]:
    """(seconds per live-env episode, seconds per bare prefill + decode of the same prompts)."""
    import gymnasium as gym

    import specpolicy  # noqa: F401

    env = gym.make("specpolicy/BlockSizeLive-v0", live={"dataset": dataset, "pair": pair,
                                                         "max_new_tokens": max_new_tokens,
                                                        "max_samples": episodes})
    source = env.unwrapped.source
    size = TRAINING_BLOCK_SIZE if TRAINING_BLOCK_SIZE in source.candidates else source.candidates[0]
    env_seconds = bare_seconds = 0.0
    for index in range(episodes):
        start = time.perf_counter()
        env.reset(seed=index, options={"prompt_index": index})
        env.step(source.candidates.index(size))
        env_seconds += time.perf_counter() - start
        ids = source.episode(np.random.default_rng(), index).ids  # the same prompt, prefilled again (untimed)
        start = time.perf_counter()
        source.decoder.generate(ids, size)
        bare_seconds += time.perf_counter() - start
    return env_seconds / episodes, bare_seconds / episodes
