"""Gymnasium environments for block-size policy learning; importing this module registers them.

``gymnasium.make("specpolicy/BlockSize-v0")`` (one step per prompt),
``gymnasium.make("specpolicy/BlockSizeStep-v0")`` (one step per cycle) and
``gymnasium.make("specpolicy/DraftVerifyStep-v0")`` (two steps per cycle: B, then L after seeing the
drafts) work after ``import specpolicy``.
"""

from __future__ import annotations

from specpolicy._gymnasium_hook import register_envs

register_envs()

from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec  # noqa: E402  (after registration)
from specpolicy.envs.agent_store import load_agent, save_agent  # noqa: E402

__all__ = ["AgentPolicy", "AgentSpec", "load_agent", "register_envs", "save_agent"]
