"""specpolicy: learn and compare block-size policies for DFlash speculative decoding. Public names load on
first use (``import specpolicy`` imports no torch); the Gymnasium IDs register when gymnasium is imported."""

from __future__ import annotations

import importlib

from specpolicy._gymnasium_hook import install as _install_gymnasium_hook

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


_install_gymnasium_hook()
