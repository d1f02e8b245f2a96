"""The built-in policy families, declared without importing them: ``catalog.json`` (entry point -> its
families: name, factory as ``"module:function"``, register options), so listing policies or building
``fixed16`` loads neither torch nor scikit-learn."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from specpolicy.hookspecs import hookimpl

FAMILIES: dict[str, list[dict]] = json.loads((Path(__file__).parent / "catalog.json").read_text())


def _qualified(target: str) -> str:
    """``"fixed:fixed_policy"`` -> ``"specpolicy.plugins.fixed:fixed_policy"`` (full paths pass through)."""
    return target if target.startswith("specpolicy.") else f"specpolicy.plugins.{target}"


def _plugin(entry: str) -> SimpleNamespace:
    """The entry-point object that registers ``FAMILIES[entry]``."""

    @hookimpl
    def register_policies(register) -> None:
        for family in FAMILIES[entry]:
            options = {key: value for key, value in family.items() if key not in ("name", "factory")}
            if "untrained" in options:
                options["untrained"] = _qualified(options["untrained"])
            register(family["name"], _qualified(family["factory"]), **options)

    return SimpleNamespace(register_policies=register_policies)


fixed, heuristic, cycle_rules, cycle, oracle, blockpilot, sklearn, verify, engines, agent = (
    _plugin(entry) for entry in FAMILIES)
