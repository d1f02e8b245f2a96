"""pluggy hook specifications of specpolicy.

A plugin is a module (or object) registered under the ``specpolicy`` entry-point group that
implements :func:`register_policies`::

    from specpolicy.hookspecs import hookimpl

    @hookimpl
    def register_policies(register):
        register("mine", lambda arg, candidates: MyPolicy(candidates), description="...")
"""

from __future__ import annotations

import pluggy

PROJECT = "specpolicy"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_policies(register) -> None:
    """Add policy families with ``register(name, factory, aliases=(), description="", learned=False,
    untrained=None)``. ``factory(arg, candidates)`` (or ``"module:function"``, imported when first built) gets
    what follows the family name (``fixed16`` -> ``"16"``) or ``None``; ``untrained(candidates, dataset,
    options)`` builds a fresh learned policy for ``specpolicy train``. Per prompt or per cycle is the policy
    class's to say (:attr:`~specpolicy.policy.Policy.per_step`)."""
