"""bench env: the vector replay throughput and the live environment's overhead over a bare decode."""

from __future__ import annotations

import pytest

from benchmarks.env import live_env_overhead


@pytest.mark.slow  # decodes with the test zoo
def test_live_env_overhead_times_the_episode_and_the_bare_decode_of_its_prompt(test_zoo, prompt_file):
    from specpolicy.models import load_pair

    pair = load_pair(*(str(p) for p in test_zoo))
    env_seconds, bare_seconds = live_env_overhead(pair, str(prompt_file), episodes=2, max_new_tokens=8)
    assert env_seconds > 0 and bare_seconds > 0
