"""Gymnasium environments for block-size policy learning; importing this module registers them.

``gymnasium.make("specpolicy/BlockSize-v0")`` (one step per prompt),
``gymnasium.make("specpolicy/BlockSizeStep-v0")`` (one step per cycle) and
``gymnasium.make("specpolicy/DraftVerifyStep-v0")`` (two steps per cycle: B, then L after seeing the
drafts) work after ``import specpolicy``.
"""

from __future__ import annotations

import gymnasium as gym

BLOCK_SIZE_ID = "specpolicy/BlockSize-v0"
BLOCK_SIZE_LIVE_ID = "specpolicy/BlockSizeLive-v0"
BLOCK_SIZE_STEP_ID = "specpolicy/BlockSizeStep-v0"
BLOCK_SIZE_STEP_LIVE_ID = "specpolicy/BlockSizeStepLive-v0"
DRAFT_VERIFY_STEP_ID = "specpolicy/DraftVerifyStep-v0"
DRAFT_VERIFY_STEP_LIVE_ID = "specpolicy/DraftVerifyStepLive-v0"


_LIVE = {"nondeterministic": True, "kwargs": {"backend": "live"}}
_SPECS = {
    BLOCK_SIZE_ID: ("block_size:BlockSizeEnv", {"vector_entry_point": "specpolicy.envs.vector:BlockSizeVectorEnv"}),
    BLOCK_SIZE_LIVE_ID: ("block_size:BlockSizeEnv", _LIVE),
    BLOCK_SIZE_STEP_ID: ("block_size_step:BlockSizeStepEnv", {"max_episode_steps": 4096}),
    BLOCK_SIZE_STEP_LIVE_ID: ("block_size_step:BlockSizeStepEnv", {"max_episode_steps": 4096, **_LIVE}),
    DRAFT_VERIFY_STEP_ID: ("draft_verify_step:DraftVerifyStepEnv", {"max_episode_steps": 8192}),
    DRAFT_VERIFY_STEP_LIVE_ID: ("draft_verify_step:DraftVerifyStepEnv", {"max_episode_steps": 8192, **_LIVE}),
}
"""environment ID -> (entry point in specpolicy.envs, gymnasium.register keywords)"""


def register_envs() -> None:
    """Register the environment IDs (idempotent)."""
    registry = gym.envs.registration.registry
    for env_id, (entry_point, options) in _SPECS.items():
        if env_id not in registry:
            gym.register(env_id, entry_point=f"specpolicy.envs.{entry_point}", **options)


register_envs()

from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec  # noqa: E402  (after registration)
from specpolicy.envs.agent_store import load_agent, save_agent  # noqa: E402

__all__ = ["AgentPolicy", "AgentSpec", "load_agent", "register_envs", "save_agent"]
