"""Save a trained agent (SB3 or LinUCB) with what it was trained on; load it as the policy ``agent:FOLDER``.
SB3 unpickles parts of its zip: load agents from sources you trust."""

from __future__ import annotations

import importlib
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec, wrapper_chain
from specpolicy.files import atomic_path

SPEC_NAME = "agent.json"
NORMALISATION_NAME = "normalisation.npz"
"""VecNormalize's observation statistics (mean, var [d]), saved beside the model and applied on load"""
SB3_MODULES = ("stable_baselines3", "sb3_contrib")
_UNUSED_ON_LOAD = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
"""training-only objects a deployed SB3 model never calls (stable-baselines3's ``custom_objects``)"""


def save_agent(agent: object, path: str | Path, env: object | None = None,
               spec: AgentSpec | None = None) -> Path:
    """Save ``agent`` (a stable-baselines3 model or a LinUCB) and the spec of ``env`` (or ``spec``) into the
    folder ``path``, whole or not at all (an earlier agent's folder is replaced, any other refused)."""
    if spec is None:
        if env is None:
            raise ValueError("save_agent needs the environment the agent learned on (env=...) or its spec "
                             "(spec=...)")
        spec = AgentSpec.of_env(env)
    _check_shapes(agent, spec, "the environment", "pass the environment (or spec) it learned on")
    with atomic_path(path, folder=SPEC_NAME) as folder:  # never half an agent, never two mixed
        _save_into(folder, agent, env, spec)
    return Path(path)


def _save_into(folder: Path, agent: object, env: object | None, spec: AgentSpec) -> None:
    """The agent's files and its ``agent.json`` in the (temporary) ``folder``."""
    from specpolicy.envs.bandit import LinUCB

    if isinstance(agent, LinUCB):
        agent.save(folder)
        saved = {"format": "linucb"}
    elif type(agent).__module__.startswith(SB3_MODULES) and hasattr(agent, "save"):
        agent.save(folder / "model.zip")
        saved = {"format": "sb3", "algorithm": f"{type(agent).__module__}:{type(agent).__name__}"}
        normaliser = _vec_normalize(agent, env)
        if normaliser is not None:  # the statistics the agent saw its observations through
            np.savez(folder / NORMALISATION_NAME, mean=normaliser.obs_rms.mean, var=normaliser.obs_rms.var)
            saved["normalisation"] = {"epsilon": float(normaliser.epsilon),
                                      "clip": float(normaliser.clip_obs)}
    else:
        raise ValueError("save_agent takes a stable-baselines3 model or a LinUCB, got "
                         f"{type(agent).__name__}; for another agent, build AgentPolicy(act, spec) and "
                         "register it as a plugin")
    (folder / SPEC_NAME).write_text(json.dumps({**saved, "spec": spec.to_dict()}, indent=2))


def load_agent(path: str | Path, name: str = "agent") -> AgentPolicy:
    """The agent saved in ``path`` as a greedy policy over the candidates it was trained with."""
    folder = Path(path).expanduser()
    if not (folder / SPEC_NAME).is_file():
        raise FileNotFoundError(f"no saved agent in {folder} (no {SPEC_NAME}); save one with "
                                "specpolicy.envs.save_agent(model, FOLDER, env)")
    try:
        saved = json.loads((folder / SPEC_NAME).read_text())
        spec = AgentSpec(**{**saved["spec"], "candidates": tuple(saved["spec"]["candidates"])})
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{folder / SPEC_NAME} is damaged ({type(exc).__name__}: {exc}); "
                         "save the agent again") from exc
    if saved.get("format") == "linucb":
        from specpolicy.envs.bandit import LinUCB

        agent = LinUCB.load(folder)
        _check_shapes(agent, spec, str(folder / SPEC_NAME))
        return AgentPolicy(agent.act, spec, name)
    if saved.get("format") == "sb3":
        model = _load_sb3(folder, saved, spec)
        _check_shapes(model, spec, str(folder / SPEC_NAME))
        normalise = _normaliser(folder, saved.get("normalisation"), spec.observation_size)
        return AgentPolicy(
            lambda observation: int(model.predict(normalise(observation), deterministic=True)[0]),
                           spec, name)
    raise ValueError(f"{folder / SPEC_NAME} names an unknown agent format {saved.get('format')!r}; "
                     "known: sb3, linucb")


def _vec_normalize(agent: object, env: object | None) -> object | None:
    """The VecNormalize (normalising observations) in ``env``'s wrappers or the model's own environment."""
    getter = getattr(agent, "get_vec_normalize_env", None)
    for root in (env, getter() if getter else None):
        for inner in wrapper_chain(root) if root is not None else ():
            if type(inner).__name__ == "VecNormalize" and getattr(inner, "norm_obs", False):
                return inner
    return None


def _check_shapes(agent: object, spec: AgentSpec, where: str, fix: str = "save the agent again") -> None:
    """Refuse a spec whose observation size or candidates are not the agent's (SB3 spaces, LinUCB arrays)."""
    space, actions = getattr(agent, "observation_space", None), getattr(getattr(agent, "action_space", None),
                                                                        "n", None)
    size = int(np.prod(space.shape)) if space is not None else len(getattr(agent, "mean", ()))
    arms = int(actions) if actions is not None else len(getattr(agent, "candidates", spec.candidates))
    arms = len(spec.candidates) if spec.granularity == "draft_verify" else arms
    if (spec.observation_size and size != spec.observation_size) or arms != len(spec.candidates):
        raise ValueError(f"the agent reads observations of {size} and acts over {arms} choices; {where} says "
                         f"observations of {spec.observation_size} and {len(spec.candidates)} candidates "
                         f"{list(spec.candidates)}: {fix}")


def _normaliser(folder: Path, settings: dict | None, size: int):
    """observation [d] -> what the agent was trained on: VecNormalize's clip((x - mean) / sqrt(var + eps))."""
    if settings is None:
        return lambda observation: observation
    try:
        with np.load(folder / NORMALISATION_NAME) as stats:
            mean, scale = stats["mean"], np.sqrt(stats["var"] + settings["epsilon"])
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{folder / NORMALISATION_NAME} is missing or damaged "
                         f"({type(exc).__name__}); the agent was trained on normalised "
                         "observations: save it again with save_agent") from None
    if (size and mean.shape != (size,)) or mean.shape != scale.shape:
        raise ValueError(f"{folder / NORMALISATION_NAME} holds statistics of {mean.size} features; the "
                         f"agent reads {size}: save it again with save_agent")
    return lambda observation: np.clip((observation - mean) / scale, -settings["clip"], settings["clip"]
                                       ).astype(np.float32)


def _load_sb3(folder: Path, saved: dict, spec: AgentSpec) -> object:
    """The SB3 model of ``folder``, checked against ``agent.json`` (exists, loads, acts over its sizes)."""
    # untrusted: refused first
    file, algorithm = folder / "model.zip", _sb3_class(saved.get("algorithm", ""), folder)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing; save the agent again with save_agent(model, {folder}, "
                                "env)")
    try:
        model = algorithm.load(file, device="cpu", custom_objects=_UNUSED_ON_LOAD)
    except Exception as exc:
        raise ValueError(f"{file} is damaged or not a {algorithm.__name__} model "
                         f"({type(exc).__name__}: {exc}); save the agent again") from None
    actions = getattr(model.action_space, "n", None)
    if actions is not None and spec.granularity != "draft_verify" and int(actions) != len(spec.candidates):
        raise ValueError(f"{file} acts over {actions} actions but {folder / SPEC_NAME} names "
                         f"{len(spec.candidates)} candidates; save the agent again")
    return model


def _sb3_class(algorithm: str, folder: Path) -> type:
    module, _, name = algorithm.partition(":")
    if not module.startswith(SB3_MODULES):
        raise ValueError(f"{folder / SPEC_NAME} names the algorithm {algorithm!r}; only stable-baselines3 "
                         "and sb3-contrib algorithms load")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ValueError(f"the agent in {folder} needs {module.split('.')[0]} ({exc}); "
                         f"pip install {module.split('.')[0].replace('_', '-')}") from exc


def agent_policy(arg: str | None, candidates: Sequence[int]) -> AgentPolicy:
    """The ``agent:FOLDER`` family: a saved agent runs over its own candidates (its action indices)."""
    if not arg:
        raise ValueError("agent needs a saved agent folder: agent:FOLDER (save one with "
                         "specpolicy.envs.save_agent(model, FOLDER, env))")
    return load_agent(arg, name=f"agent:{arg}")
