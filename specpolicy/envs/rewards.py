"""The one reward vocabulary of the environments; each refuses a name its granularity and backend cannot
compute before loading anything."""

from __future__ import annotations

REWARDS = {
    "tau": "the prompt's mean accepted length (per prompt)",
    "cost": "tau - cost_weight * (B - 1) (per prompt)",
    "time": "tokens per second: of the prompt's decode (per prompt; modelled in replay, measured live) or "
            "of the cycle, in tokens per AR step (per cycle, replay)",
    "seconds": "minus the modelled seconds in AR steps (replay): the return ranks policies by decode time",
    "tokens": "tokens committed by the cycle (per cycle)",
    "saved": "tokens committed minus the cycle's modelled cost in AR steps (per cycle, replay): the return "
             "is the AR steps the decode saved",
}
"""reward name -> what it measures"""

_OFFERED = {
    ("prompt", "replay"): ("tau", "cost", "time", "seconds"),
    ("prompt", "live"): ("tau", "cost", "time"),
    ("cycle", "replay"): ("tokens", "time", "seconds", "saved"),
    ("cycle", "live"): ("tokens",),
    ("draft_verify", "replay"): ("tokens", "time", "seconds", "saved"),
    ("draft_verify", "live"): ("tokens",),
}
BACKENDS = ("replay", "live")


def offered(granularity: str, backend: str) -> tuple[str, ...]:
    """The rewards an environment of ``granularity`` (prompt, cycle, draft_verify) offers on ``backend``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    return _OFFERED[(granularity, backend)]


def check_reward(reward: str, granularity: str, backend: str) -> str:
    """``reward`` when the environment offers it, else one ValueError listing the valid ones."""
    valid = offered(granularity, backend)
    if reward in valid:
        return reward
    known = "" if reward in REWARDS else "unknown "
    raise ValueError(f"{known}reward {reward!r} is not offered by the per-{granularity.replace('_', '-')} "
                     f"environment's {backend} backend; use one of {', '.join(valid)}")
