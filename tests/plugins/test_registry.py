"""Plugin discovery, name parsing and failure isolation."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

from specpolicy.hookspecs import hookimpl
from specpolicy.plugins.fixed import FixedPolicy
from specpolicy.registry import PluginLoadWarning, build_registry, get_registry


def test_names_parse_into_family_and_argument():
    registry = get_registry()
    assert registry.create("fixed16").block_size == 16
    assert registry.create("dflash12").block_size == 12
    family, arg = registry.parse("blockpilot:/some/path")
    assert (family.name, arg) == ("blockpilot", "/some/path")
    assert registry.parse("oracle-step")[0].per_step


def test_unknown_name_lists_known_ones_and_suggests():
    expected = r"unknown policy 'blockpilto'\. Did you mean 'blockpilot'\?.*Known policies: "
    with pytest.raises(ValueError, match=expected):
        get_registry().create("blockpilto")


def test_fixed_without_size_fails_clearly():
    with pytest.raises(ValueError, match="fixed needs a block size"):
        get_registry().create("fixed")


class FakeEntryPoint:
    def __init__(self, name, module, dist_name="thirdparty-policies"):
        self.name, self.module = name, module
        self.dist = types.SimpleNamespace(name=dist_name)

    def load(self):
        return importlib.import_module(self.module)


@pytest.fixture()
def third_party(monkeypatch):
    """A fake third-party distribution: one good plugin module and one that fails to import."""
    module = types.ModuleType("thirdparty_policy")

    class AlwaysFifteen(FixedPolicy):
        pass

    @hookimpl
    def register_policies(register):
        register("fifteen", lambda arg, candidates: AlwaysFifteen(15, candidates), description="always 15")

    module.register_policies = register_policies
    monkeypatch.setitem(sys.modules, "thirdparty_policy", module)
    real = importlib.metadata.entry_points

    def entry_points(**kwargs):
        found = list(real(**kwargs))
        if kwargs.get("group") == "specpolicy":
            found += [FakeEntryPoint("fifteen", "thirdparty_policy"), FakeEntryPoint("broken", "no_such_module_xyz")]
        return found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    yield
    monkeypatch.undo()
    get_registry(refresh=True)


def test_third_party_plugin_is_found_and_a_broken_one_is_skipped(third_party):
    with pytest.warns(PluginLoadWarning, match="'broken'"):
        registry = get_registry(refresh=True)
    family, _ = registry.parse("fifteen")
    assert family.distribution == "thirdparty-policies"
    assert registry.create("fifteen").block_size == 15
    assert "broken" in registry.failures
    assert registry.create("fixed16").block_size == 16  # the rest keep working


def test_load_plugins_env_restricts_entry_points(third_party, monkeypatch):
    monkeypatch.setenv("SPECPOLICY_LOAD_PLUGINS", "fixed,fifteen")
    registry = build_registry()
    assert {f.name for f in registry.unique()} == {"fixed", "random", "fifteen"}
    assert not registry.failures
