"""Gymnasium environments: ``specpolicy/BlockSize-v0`` (a step per prompt), ``BlockSizeStep-v0`` (per cycle),
``DraftVerifyStep-v0`` (B, then L), registered on ``import specpolicy``."""

from __future__ import annotations

from specpolicy import register_envs

register_envs()

from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec  # noqa: E402  (after registration)
from specpolicy.envs.agent_store import load_agent, save_agent  # noqa: E402

__all__ = ["AgentPolicy", "AgentSpec", "load_agent", "register_envs", "save_agent"]
