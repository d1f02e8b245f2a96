"""pluggy hook specifications: a plugin under the ``specpolicy`` entry-point group implements
:func:`register_policies` (``@hookimpl def register_policies(register): register("mine", factory)``)."""

from __future__ import annotations

import pluggy

PROJECT = "specpolicy"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_policies(register) -> None:
    """Add policy families: ``register(name, factory, aliases=(), description="", learned=False,
    untrained=None)``; ``factory(arg, candidates)`` (or a ``"module:function"``) gets the name's tail."""
