"""Gymnasium environments for block-size policy learning; importing this module registers them.

``gymnasium.make("specpolicy/BlockSize-v0")`` (one step per prompt) and
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


def register_envs() -> None:
    """Register the environment IDs (idempotent)."""
    registry = gym.envs.registration.registry
    if BLOCK_SIZE_ID not in registry:
        gym.register(BLOCK_SIZE_ID, entry_point="specpolicy.envs.block_size:BlockSizeEnv",
                     vector_entry_point="specpolicy.envs.vector:BlockSizeVectorEnv")
    if BLOCK_SIZE_LIVE_ID not in registry:
        gym.register(BLOCK_SIZE_LIVE_ID, entry_point="specpolicy.envs.block_size:BlockSizeEnv",
                     nondeterministic=True, kwargs={"backend": "live"})
    if BLOCK_SIZE_STEP_ID not in registry:
        gym.register(BLOCK_SIZE_STEP_ID, entry_point="specpolicy.envs.block_size_step:BlockSizeStepEnv",
                     max_episode_steps=4096)
    if BLOCK_SIZE_STEP_LIVE_ID not in registry:
        gym.register(BLOCK_SIZE_STEP_LIVE_ID, entry_point="specpolicy.envs.block_size_step:BlockSizeStepEnv",
                     max_episode_steps=4096, nondeterministic=True, kwargs={"backend": "live"})
    if DRAFT_VERIFY_STEP_ID not in registry:
        gym.register(DRAFT_VERIFY_STEP_ID, entry_point="specpolicy.envs.draft_verify_step:DraftVerifyStepEnv",
                     max_episode_steps=8192)
    if DRAFT_VERIFY_STEP_LIVE_ID not in registry:
        gym.register(DRAFT_VERIFY_STEP_LIVE_ID, entry_point="specpolicy.envs.draft_verify_step:DraftVerifyStepEnv",
                     max_episode_steps=8192, nondeterministic=True, kwargs={"backend": "live"})


register_envs()
