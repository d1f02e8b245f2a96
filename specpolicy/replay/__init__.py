"""Engines that run a Plan with no model (numpy only): replay tables and sessions, the exact (B, L) oracle,
rules over lanes and their lockstep replay, the serving simulation, batch costs and the vLLM / SGLang
configurations."""
