"""Register the Gymnasium environments the moment gymnasium is imported, so ``import specpolicy`` stays light.

``import specpolicy`` imports neither gymnasium nor torch. When gymnasium is already loaded the IDs
are registered at once; otherwise a one-shot import hook registers them right after gymnasium's own
import, whichever comes first in the user's code. ``specpolicy.envs`` imports gymnasium itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType


def _register() -> None:
    envs = sys.modules.get("specpolicy.envs")
    if envs is not None and not hasattr(envs, "register_envs"):
        return  # specpolicy.envs is importing gymnasium itself; it registers when its import finishes
    from specpolicy.envs import register_envs

    register_envs()


class _RegisteringLoader(importlib.abc.Loader):
    """Runs gymnasium's own loader, then registers the environments."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _register()


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


def install() -> None:
    """Register now if gymnasium is loaded, else when it is (idempotent)."""
    if "gymnasium" in sys.modules:
        _register()
    elif not any(isinstance(finder, _AfterGymnasium) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterGymnasium())
