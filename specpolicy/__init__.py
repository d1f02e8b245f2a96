"""specpolicy: learn and compare block-size policies for DFlash speculative decoding. Public names load on
first use (``import specpolicy`` imports no torch); the Gymnasium IDs register when gymnasium is imported (at
once if it already is, else by a one-shot import hook), so ``import specpolicy`` stays light; entry points are
strings resolved at ``make``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

__version__ = "0.1.0"

_PUBLIC = {
    # the policy contract (no torch)
    "Policy": "specpolicy.policy", "LearnedPolicy": "specpolicy.policy",
           "PromptObservation": "specpolicy.policy",
    "Answers": "specpolicy.policy", "TrainingSet": "specpolicy.policy", "DecodeState": "specpolicy.state",
    "hookimpl": "specpolicy.hookspecs", "check_policy": "specpolicy.checks",
           "get_registry": "specpolicy.registry",
    # cycles, costs and replay (no torch)
    "CycleRecord": "specpolicy.cycles", "Plan": "specpolicy.cycles", "run": "specpolicy.cycles",
    "CostTable": "specpolicy.costs", "ReplayTable": "specpolicy.replay.table",
    # decoding and models (torch)
    "SpeculativeDecoder": "specpolicy.decoding", "DecodeSession": "specpolicy.decoding",
    "DecodeTrace": "specpolicy.decoding", "plain_decode": "specpolicy.decoding",
           "load_pair": "specpolicy.models",
    # sweeps, evaluation and training
    "SweepSettings": "specpolicy.sweep.settings", "run_sweep": "specpolicy.sweep.run",
    "SweepStore": "specpolicy.sweep.store", "SweepRecord": "specpolicy.sweep.records",
    "build_replay": "specpolicy.sweep.replay", "evaluate_replay": "specpolicy.evaluation.replay",
    "evaluate_live": "specpolicy.evaluation.live", "training_set": "specpolicy.training.data",
}
__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'specpolicy' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


BLOCK_SIZE_ID = "specpolicy/BlockSize-v0"
BLOCK_SIZE_LIVE_ID = "specpolicy/BlockSizeLive-v0"
BLOCK_SIZE_STEP_ID = "specpolicy/BlockSizeStep-v0"
BLOCK_SIZE_STEP_LIVE_ID = "specpolicy/BlockSizeStepLive-v0"
DRAFT_VERIFY_STEP_ID = "specpolicy/DraftVerifyStep-v0"
DRAFT_VERIFY_STEP_LIVE_ID = "specpolicy/DraftVerifyStepLive-v0"

_LIVE = {"nondeterministic": True, "kwargs": {"backend": "live"}}
_SPECS = {
    BLOCK_SIZE_ID: ("block_size:BlockSizeEnv",
                    {"vector_entry_point": "specpolicy.envs.vector:BlockSizeVectorEnv"}),
    BLOCK_SIZE_LIVE_ID: ("block_size:BlockSizeEnv", _LIVE),
    BLOCK_SIZE_STEP_ID: ("block_size_step:BlockSizeStepEnv", {"max_episode_steps": 4096}),
    BLOCK_SIZE_STEP_LIVE_ID: ("block_size_step:BlockSizeStepEnv", {"max_episode_steps": 4096, **_LIVE}),
    DRAFT_VERIFY_STEP_ID: ("draft_verify_step:DraftVerifyStepEnv", {"max_episode_steps": 8192}),
    DRAFT_VERIFY_STEP_LIVE_ID: ("draft_verify_step:DraftVerifyStepEnv", {"max_episode_steps": 8192, **_LIVE}),
}
"""environment ID -> (entry point in specpolicy.envs, gymnasium.register keywords)"""


def register_envs() -> None:
    """Register the environment IDs (idempotent; gymnasium must be importable)."""
    import gymnasium as gym

    registry = gym.envs.registration.registry
    for env_id, (entry_point, options) in _SPECS.items():
        if env_id not in registry:
            gym.register(env_id, entry_point=f"specpolicy.envs.{entry_point}", **options)


class _RegisteringLoader(importlib.abc.Loader):
    """Runs gymnasium's own loader, then registers the environments."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        register_envs()


class _AfterGymnasium(importlib.abc.MetaPathFinder):
    """Finds gymnasium through the other finders (once) and wraps its loader."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "gymnasium":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


if "gymnasium" in sys.modules:  # register now if gymnasium is loaded, else when it is
    register_envs()
elif not any(isinstance(finder, _AfterGymnasium) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterGymnasium())
