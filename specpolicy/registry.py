"""Plugin manager, entry-point loading and the policy registry.

Built-in policies register through the project's own ``[project.entry-points.specpolicy]`` table,
the same route a third-party package takes. ``SPECPOLICY_LOAD_PLUGINS=name1,name2`` limits which
entry points load; a plugin that fails to import is reported and skipped.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pluggy

from specpolicy import hookspecs
from specpolicy.policy import DEFAULT_CANDIDATES, Policy

PolicyFactory = Callable[[str | None, Sequence[int]], Policy]


class PluginLoadWarning(UserWarning):
    """A plugin failed to load and was skipped."""


@dataclass
class PolicyFamily:
    """A registered family of policies (``fixed`` gives ``fixed14``, ``fixed16``, ...)."""

    name: str
    factory: PolicyFactory
    aliases: tuple[str, ...] = ()
    description: str = ""
    per_step: bool = False
    learned: bool = False
    untrained: Callable | None = None
    """``untrained(candidates, dataset, options)``: a fresh policy for training (learned families)"""
    plugin: str = ""
    distribution: str = ""


@dataclass
class PolicyRegistry:
    """Families by name; :meth:`create` parses a policy name and builds the policy."""

    families: dict[str, PolicyFamily] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def register(self, family: PolicyFamily) -> None:
        for name in (family.name, *family.aliases):
            if name in self.families and self.families[name].plugin != family.plugin:
                raise ValueError(f"policy name {name!r} from plugin {family.plugin!r} is already registered by "
                                 f"{self.families[name].plugin!r}")
            self.families[name] = family

    def unique(self) -> list[PolicyFamily]:
        """Each family once, in registration order."""
        seen, out = set(), []
        for family in self.families.values():
            if family.name not in seen:
                seen.add(family.name)
                out.append(family)
        return out

    def parse(self, name: str) -> tuple[PolicyFamily, str | None]:
        """``fixed16`` -> (fixed, "16"); ``blockpilot:PATH`` -> (blockpilot, "PATH"); ``oracle`` -> (oracle, None)."""
        head, _, path = name.strip().partition(":")
        if head in self.families:
            return self.families[head], (path or None)
        match = re.fullmatch(r"(.*?)(\d+)", head)
        if match and match.group(1) in self.families and not path:
            return self.families[match.group(1)], match.group(2)
        known = sorted(self.families)
        close = difflib.get_close_matches(head, [*known, *(f"{k}16" for k in known)], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        failed = f" (plugins that failed to load: {', '.join(self.failures)})" if self.failures else ""
        raise ValueError(f"unknown policy {name!r}.{hint} Known policies: {', '.join(known)}{failed}")

    def create(self, name: str, candidates: Sequence[int] = DEFAULT_CANDIDATES) -> Policy:
        """Build the policy ``name`` over ``candidates``."""
        family, arg = self.parse(name)
        policy = family.factory(arg, tuple(candidates))
        policy.name = name
        return policy


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group=hookspecs.PROJECT)
    allowed = os.environ.get("SPECPOLICY_LOAD_PLUGINS")
    if allowed is not None:
        names = {n.strip() for n in allowed.split(",") if n.strip()}
        eps = [ep for ep in eps if ep.name in names]
    unique: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in eps:
        unique.setdefault(ep.name, ep)  # an editable and a regular install can list the same entry point
    return list(unique.values())


def build_registry(extra_plugins: Sequence[object] = ()) -> PolicyRegistry:
    """Load every entry-point plugin (and ``extra_plugins``) and collect their policy families."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    registry = PolicyRegistry()
    sources: dict[int, tuple[str, str]] = {}
    for ep in _entry_points():
        distribution = ep.dist.name if ep.dist is not None else ""
        try:
            plugin = ep.load()
            manager.register(plugin, name=ep.name)
        except Exception as exc:  # a broken plugin must not take the others down
            registry.failures[ep.name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"specpolicy plugin {ep.name!r} ({distribution}) failed to load and was skipped: {exc}",
                          PluginLoadWarning, stacklevel=2)
            continue
        sources[id(plugin)] = (ep.name, distribution)
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", type(plugin).__name__)
        manager.register(plugin, name=name)
        sources[id(plugin)] = (name, "")
    for impl in manager.hook.register_policies.get_hookimpls():
        plugin_name, distribution = sources.get(id(impl.plugin), (impl.plugin_name, ""))

        def register(name: str, factory: PolicyFactory, aliases: Sequence[str] = (), description: str = "",
                     per_step: bool = False, learned: bool = False, untrained: Callable | None = None,
                     _p=plugin_name, _d=distribution) -> None:
            registry.register(PolicyFamily(name, factory, tuple(aliases), description, per_step, learned, untrained,
                                           _p, _d))

        try:
            impl.function(register=register)
        except Exception as exc:
            registry.failures[plugin_name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"specpolicy plugin {plugin_name!r} failed in register_policies and was skipped: {exc}",
                          PluginLoadWarning, stacklevel=2)
    return registry


_REGISTRY: PolicyRegistry | None = None


def get_registry(refresh: bool = False) -> PolicyRegistry:
    """The process-wide registry (built on first use)."""
    global _REGISTRY
    if _REGISTRY is None or refresh:
        _REGISTRY = build_registry()
    return _REGISTRY


def create_policy(name: str, candidates: Sequence[int] = DEFAULT_CANDIDATES) -> Policy:
    """Build a registered policy by name, e.g. ``create_policy("fixed16")``."""
    return get_registry().create(name, candidates)
