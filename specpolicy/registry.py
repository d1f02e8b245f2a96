"""Plugin manager, entry-point loading and the policy registry: built-ins register through entry points as a
third party's do; ``SPECPOLICY_LOAD_PLUGINS=a,b`` limits them; a plugin that fails is reported and skipped."""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pluggy

from specpolicy import hookspecs
from specpolicy.arguments import check_candidate_set
from specpolicy.policy import DEFAULT_CANDIDATES, Policy

PolicyFactory = Callable[[str | None, Sequence[int]], Policy]
"""``factory(arg, candidates)``, or a ``"module:function"`` string imported on first use"""


class PluginLoadWarning(UserWarning):
    """A plugin failed to load and was skipped."""


@dataclass
class PolicyFamily:
    """A registered family of policies (``fixed`` gives ``fixed14``, ``fixed16``, ...)."""

    name: str
    factory: PolicyFactory | str
    aliases: tuple[str, ...] = ()
    description: str = ""
    learned: bool = False
    untrained: Callable | str | None = None
    """``untrained(candidates, dataset, options)``: a fresh policy for training (learned families)"""
    plugin: str = ""
    distribution: str = ""

    def build(self, arg: str | None, candidates: Sequence[int]) -> Policy:
        """The policy ``factory(arg, candidates)`` makes (the factory's module is imported now if named)."""
        return self._resolve(self.factory)(arg, candidates)

    def build_untrained(self, candidates: Sequence[int], dataset: object, options: dict) -> Policy:
        """A fresh policy to train: ``untrained(...)``, else ``factory(None, candidates)``."""
        if self.untrained is None:
            return self.build(None, candidates)
        return self._resolve(self.untrained)(candidates, dataset, options)

    def _resolve(self, target: Callable | str) -> Callable:
        if callable(target):
            return target
        module, _, attribute = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"policy family {self.name!r} (plugin {self.plugin!r}) points at "
                             f"{target!r}, which cannot be loaded ({type(exc).__name__}: {exc}); "
                             f"reinstall {self.distribution or 'the plugin'}") from exc


@dataclass
class PolicyRegistry:
    """Families by name; :meth:`create` parses a policy name and builds the policy."""

    families: dict[str, PolicyFamily] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def register(self, family: PolicyFamily) -> None:
        for name in (family.name, *family.aliases):
            if name in self.families and self.families[name].plugin != family.plugin:
                raise ValueError(f"policy name {name!r} from plugin {family.plugin!r} is already registered "
                                 f"by {self.families[name].plugin!r}")
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
        """``fixed16`` -> (fixed, "16"); ``blockpilot:PATH`` -> (blockpilot, "PATH"); ``oracle``: no arg."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a policy name is a non-empty string such as 'fixed16' or 'blockpilot', got "
                             f"{name!r}")
        head, colon, path = name.strip().partition(":")
        if colon and not path.strip():
            raise ValueError(f"policy {name!r} ends in ':' with no argument: drop the ':', or give one "
                             "(such as blockpilot:PATH or threshold:0.5)")
        if any(c.isdecimal() and not c.isascii() for c in name):
            raise ValueError(f"policy {name!r} has a digit outside 0-9; write its numbers with 0-9")
        if head in self.families:
            return self.families[head], (path or None)
        match = re.fullmatch(r"(.*?)([0-9]+)", head)
        if match and match.group(1) in self.families and not path:
            return self.families[match.group(1)], match.group(2)
        known = sorted(self.families)
        close = difflib.get_close_matches(head, [*known, *(f"{k}16" for k in known)], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        failed = "".join(f" (plugin {plugin!r} failed to load: {why})"
                         for plugin, why in self.failures.items())
        raise ValueError(f"unknown policy {name!r}.{hint} Known policies: {', '.join(known)}{failed}")

    def create(self, name: str, candidates: Sequence[int] = DEFAULT_CANDIDATES) -> Policy:
        """Build the policy ``name`` over ``candidates``."""
        family, arg = self.parse(name)
        try:
            policy = family.build(arg, check_candidate_set(candidates))
        except ValueError as error:  # name the policy the bad argument came from (``fixed0``)
            raise ValueError(f"policy {name!r}: {error}") if name not in str(error) else error from None
        if not isinstance(policy, Policy):
            raise ValueError(f"policy {name!r}: the factory registered for {family.name!r} returned "
                             f"{type(policy).__name__}, not a Policy; fix the plugin that registers it "
                             f"({family.distribution or 'unknown distribution'})")
        policy.name = name
        return policy


BUILTIN_DISTRIBUTION = "specpolicy"


def _entry_point_names() -> list[str]:
    """Names in the ``specpolicy`` entry-point group, limited by ``SPECPOLICY_LOAD_PLUGINS`` when set."""
    names = sorted({ep.name for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT)})
    allowed = os.environ.get("SPECPOLICY_LOAD_PLUGINS")
    if allowed is not None:
        keep = {n.strip() for n in allowed.split(",") if n.strip()}
        names = [n for n in names if n in keep]
    return names


def _fail(registry: PolicyRegistry, plugin: str, why: str) -> None:
    registry.failures[plugin] = why
    warnings.warn(f"specpolicy plugin {plugin!r} was skipped: {why}", PluginLoadWarning, stacklevel=3)


def _load_plugins(manager: pluggy.PluginManager, registry: PolicyRegistry) -> None:
    """pluggy's entry-point loading: every plugin in one pass over the installed distributions, where each
    loads (and ``SPECPOLICY_LOAD_PLUGINS`` is unset); else one name at a time, so a broken plugin skips alone
    (those loaded stay); then check_pending."""
    if os.environ.get("SPECPOLICY_LOAD_PLUGINS") is None:
        try:
            manager.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception:  # the names below say which plugin, and why
            pass
        else:
            return _check_pending(manager, registry)
    for name in _entry_point_names():
        try:
            manager.load_setuptools_entrypoints(hookspecs.PROJECT, name=name)
        except Exception as exc:  # a broken plugin must not take the others down
            _fail(registry, name, f"failed to load ({type(exc).__name__}: {exc})")
    _check_pending(manager, registry)


def _check_pending(manager: pluggy.PluginManager, registry: PolicyRegistry) -> None:
    """Unregister, each with a warning, plugins implementing a hook no spec declares (misspellings speak)."""
    while True:
        try:
            manager.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = manager.get_name(exc.plugin) or repr(exc.plugin)
            manager.unregister(exc.plugin)
            _fail(registry, name, f"{exc} (the hook is `register_policies`)")


def build_registry(extra_plugins: Sequence[object] = ()) -> PolicyRegistry:
    """Load every entry-point plugin (and ``extra_plugins``) and collect their families; built-ins first, a
    taken name skipped with a warning."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    registry = PolicyRegistry()
    _load_plugins(manager, registry)
    for plugin in extra_plugins:
        manager.register(plugin, name=getattr(plugin, "__name__", type(plugin).__name__))
    distributions = {id(plugin): dist.project_name for plugin, dist in manager.list_plugin_distinfo()}
    def order(impl: pluggy.HookImpl) -> tuple[bool, bool, str]:  # built-ins, entry points by name, extras
        distribution = distributions.get(id(impl.plugin))
        name = impl.plugin_name if distribution else ""  # extras: in the order given
        return distribution != BUILTIN_DISTRIBUTION, distribution is None, name

    impls = sorted(manager.hook.register_policies.get_hookimpls(), key=order)
    for impl in impls:
        _collect(registry, impl.plugin_name, distributions.get(id(impl.plugin), ""), impl.function)
    return registry


def _collect(registry: PolicyRegistry, plugin: str, distribution: str, hook: Callable) -> None:
    """Run one plugin's ``register_policies``; its families land only if all of them are free names."""
    families: list[PolicyFamily] = []

    def register(name: str, factory: PolicyFactory | str, aliases: Sequence[str] = (), description: str = "",
                 learned: bool = False, untrained: Callable | None = None, **removed: object) -> None:
        if "per_step" in removed:
            raise TypeError("register(per_step=...) was removed: set `per_step = True` on the policy class "
                            "(or override `plan`), whose plan says per cycle or per prompt")
        if removed:
            raise TypeError(f"register() takes no {', '.join(map(repr, removed))}; see specpolicy.hookspecs")
        families.append(PolicyFamily(name, factory, tuple(aliases), description, learned, untrained,
                                     plugin, distribution))

    try:
        hook(register=register)
    except Exception as exc:
        _fail(registry, plugin, str(exc) if isinstance(exc, TypeError) and "register(" in str(exc)
              else f"register_policies raised {type(exc).__name__}: {exc}")
        return
    for family in families:
        for name in (family.name, *family.aliases):
            owner = registry.families.get(name)
            if owner is not None and owner.plugin != plugin:
                _fail(registry, plugin, f"it registers the policy name {name!r}, which plugin "
                                        f"{owner.plugin!r} ({owner.distribution or 'local'}) already has; "
                                        f"rename it in {distribution or plugin}")
                return
    for family in families:
        registry.register(family)


_REGISTRY: PolicyRegistry | None = None


def blame_plugin(error: BaseException) -> PolicyFamily | None:
    """The third-party family whose own code raised ``error`` (a module of its plugin in the traceback), or
    ``None``: a plugin's bug is reported as the plugin's, not specpolicy's."""
    if _REGISTRY is None:
        return None
    packages: dict[str, PolicyFamily] = {}
    for family in _REGISTRY.unique():
        if family.distribution != BUILTIN_DISTRIBUTION:
            factory = family.factory
            module = factory.partition(":")[0] if isinstance(factory, str) else factory.__module__
            packages.setdefault(module.split(".")[0], family)
    traceback, culprit = error.__traceback__, None
    while traceback is not None:  # the innermost plugin frame decides
        package = str(traceback.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        culprit = packages.get(package, culprit)
        traceback = traceback.tb_next
    return culprit


def get_registry(refresh: bool = False) -> PolicyRegistry:
    """The process-wide registry (built on first use)."""
    global _REGISTRY
    if _REGISTRY is None or refresh:
        _REGISTRY = build_registry()
    return _REGISTRY


def create_policy(name: str, candidates: Sequence[int] = DEFAULT_CANDIDATES) -> Policy:
    """Build a registered policy by name, e.g. ``create_policy("fixed16")``."""
    return get_registry().create(name, candidates)
