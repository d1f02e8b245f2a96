"""The maintainers' benchmarks behind docs/benchmarks.md (run from a checkout: ``python -m benchmarks ...``).

What a user needs on their own machine stays in the package (``specpolicy bench latency``, ``batch-latency``,
``gpu-check``); these measure the project's claims: loop overhead, the transformers loop against specpolicy's,
(B, L) replay against live decoding, the cost of a replay sweep, and environment steps per second.
"""

ENV_NUM_ENVS = 1024
"""vector environments stepped by ``env``"""
ENV_STEPS = 200
"""vector steps timed by ``env``"""
ENV_LIVE_EPISODES = 6
"""live episodes timed by ``env`` (0 skips them)"""
