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
    """Add policy families by calling ``register(name, factory, aliases=(), description="", learned=False,
    untrained=None)``. Whether a policy decides per prompt or per cycle is its class's to say
    (:attr:`~specpolicy.policy.Policy.per_step`), not the registration's.

    ``factory(arg, candidates)`` builds a policy (or name it as ``"module:function"``, imported only when the
    policy is built, so listing policies stays fast); ``arg`` is what follows the family name
    (``fixed16`` -> ``"16"``, ``blockpilot:PATH`` -> ``"PATH"``) or ``None``. A learned family may pass
    ``untrained(candidates, dataset, options)``, which builds a fresh policy for ``specpolicy train``
    (``options``: the training arguments as a dict); without it training uses ``factory(None, candidates)``.
    """
