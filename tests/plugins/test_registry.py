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
    assert registry.create("oracle-step").per_step and not registry.create("oracle").per_step


def test_unknown_name_lists_known_ones_and_suggests():
    expected = r"unknown policy 'blockpilto'\. Did you mean 'blockpilot'\?.*Known policies: "
    with pytest.raises(ValueError, match=expected):
        get_registry().create("blockpilto")


def test_fixed_without_size_fails_clearly():
    with pytest.raises(ValueError, match="fixed needs a block size"):
        get_registry().create("fixed")


class FakeDistribution:
    """An installed distribution as importlib.metadata lists it, with entry points in the specpolicy group."""

    def __init__(self, name: str, entry_points: dict[str, str]) -> None:
        self.metadata = {"name": name}
        self._normalized_name = name.replace("-", "_")
        self.entry_points = [importlib.metadata.EntryPoint(n, module, "specpolicy")
                             for n, module in entry_points.items()]


def _plugin_module(name: str, body) -> types.ModuleType:
    module = types.ModuleType(name)
    body(module)
    return module


@pytest.fixture()
def install(monkeypatch):
    """Install fake distributions (name -> {entry point: module}) for the registry to find."""
    real_dists = importlib.metadata.distributions
    extra: list[FakeDistribution] = []
    monkeypatch.setattr(importlib.metadata, "distributions", lambda **kwargs: [*real_dists(**kwargs), *extra])

    def add(distribution: str, modules: dict[str, types.ModuleType]) -> None:
        for module in modules.values():
            if isinstance(module, types.ModuleType):
                monkeypatch.setitem(sys.modules, module.__name__, module)
        extra.append(FakeDistribution(distribution, {n: m.__name__ if isinstance(m, types.ModuleType) else m
                                                     for n, m in modules.items()}))

    yield add
    monkeypatch.undo()
    get_registry(refresh=True)


def _fifteen(module):
    class AlwaysFifteen(FixedPolicy):
        pass

    @hookimpl
    def register_policies(register):
        register("fifteen", lambda arg, candidates: AlwaysFifteen(15, candidates), description="always 15")

    module.register_policies = register_policies


@pytest.fixture()
def third_party(install):
    """A fake third-party distribution: one good plugin module and one that fails to import."""
    install("thirdparty-policies", {"fifteen": _plugin_module("thirdparty_policy", _fifteen),
                                    "broken": "no_such_module_xyz"})


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
    assert {f.name for f in registry.unique()} == {"fixed", "random", "choices", "fifteen"}
    assert not registry.failures


def test_a_plugin_reusing_a_builtin_name_is_skipped_and_blamed(install):
    """It used to win: the built-in was skipped, the warning blamed it, and the impostor ran as fixed16."""
    def impostor(module):
        @hookimpl
        def register_policies(register):
            register("fixed", lambda arg, candidates: FixedPolicy(1, candidates))

        module.register_policies = register_policies

    install("aaa-impostor", {"aaa": _plugin_module("aaa_impostor", impostor)})  # sorts before the built-ins
    with pytest.warns(PluginLoadWarning,
                      match=r"'aaa' was skipped: it registers the policy name 'fixed', which "
                                               r"plugin 'fixed' \(specpolicy\) already has"):
        registry = build_registry()
    assert registry.create("fixed16").block_size == 16 and registry.parse("fixed")[0].plugin == "fixed"


def test_a_misspelled_hook_is_reported_not_silently_ignored(install):
    def misspelled(module):
        @hookimpl
        def register_policy(register):  # no such hook
            register("never", lambda arg, candidates: FixedPolicy(4, candidates))

        module.register_policy = register_policy

    install("typo-policies", {"typo": _plugin_module("typo_policy", misspelled)})
    with pytest.warns(PluginLoadWarning, match="'typo' was skipped: unknown hook 'register_policy'"):
        registry = build_registry()
    assert "typo" in registry.failures and "never" not in registry.families


def test_listing_and_building_fixed16_import_neither_torch_nor_sklearn():
    """The registry is lazy: a family records where its factory lives and is imported when created."""
    import subprocess

    code = ("import sys\nfrom specpolicy.registry import create_policy, get_registry\n"
            "names = [f.name for f in get_registry().unique()]\nassert 'blockpilot' in names, names\n"
            "assert create_policy('fixed16').block_size == 16\n"
            "print(' '.join(m for m in ('torch', 'sklearn', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == []


def test_a_family_given_as_a_module_path_is_imported_when_created(install):
    def body(module):
        module.made = []

        @hookimpl
        def register_policies(register):
            register("lazyfixed", "specpolicy.plugins.fixed:fixed_policy", description="lazy")

        module.register_policies = register_policies

    install("lazy-dist", {"lazy": _plugin_module("lazy_plugin", body)})
    registry = build_registry()
    assert registry.create("lazyfixed12").block_size == 12


def _misbehaving(module):
    class Divides(FixedPolicy):
        def select(self, observation):
            return 16 // 0  # a bug in the plugin, not in specpolicy

    def broken_factory(arg, candidates):
        raise TypeError("factory() got an unexpected keyword")

    @hookimpl
    def register_policies(register):
        register("divides", lambda arg, candidates: Divides(16, candidates))
        register("unbuildable", broken_factory)

    module.register_policies = register_policies


def test_a_misbehaving_plugin_is_blamed_by_name_once_and_specpolicy_is_not(install, replay_store):
    """Reported: a plugin factory or select raising said "This is a bug in specpolicy", and a broken plugin
    was reported twice on every command."""
    from typer.testing import CliRunner

    import specpolicy.registry
    from specpolicy.cli import app

    install("acme-policies",
            {"acme": _plugin_module("acme_policies", _misbehaving), "gone": "no_such_module_xyz"})
    for name in ("divides", "unbuildable"):
        specpolicy.registry._REGISTRY = None  # a fresh command builds its registry
        with pytest.warns(PluginLoadWarning) as warned:
            result = CliRunner().invoke(app, ["compare", "--policies", f"fixed16,{name}", "--sweep",
                                              str(replay_store.path), "--candidates", "16"])
        output = " ".join(result.output.split())
        assert result.exit_code == 2 and "bug in specpolicy" not in output, output
        assert "plugin 'acme'" in output and "acme-policies" in output, output
        assert sum("'gone'" in str(w.message) for w in warned) == 1


@pytest.mark.parametrize("name", [None, 16, ""])
def test_a_policy_name_that_is_no_name_is_refused_in_one_line(name):
    """Reported: ``create_policy(None)`` ended in an AttributeError traceback."""
    from specpolicy.registry import create_policy

    with pytest.raises(ValueError, match="a policy name is a non-empty string such as 'fixed16'"):
        create_policy(name)


@pytest.mark.parametrize("family", ["fixed16", "adaptive", "oracle"])
def test_candidates_given_as_a_string_are_refused_not_read_letter_by_letter(family):
    """``create_policy("fixed16", "4,8,16")`` said "got '4'" (the string was split into characters)."""
    from specpolicy.registry import create_policy

    with pytest.raises(ValueError, match="candidates must be a list of block sizes such as"):
        create_policy(family, "4,8,16")


def test_the_removed_per_step_keyword_names_its_replacement_and_unknown_policy_says_why(install):
    """Issue 48: plugins of the previous release pass register(..., per_step=True); they failed with a bare
    TypeError, and asking for their policy said only 'unknown policy'."""
    def old(module):
        @hookimpl
        def register_policies(register):
            register("oldstyle", lambda arg, candidates: FixedPolicy(4, candidates), per_step=True)

        module.register_policies = register_policies

    install("old-policies", {"old": _plugin_module("old_policy", old)})
    with pytest.warns(PluginLoadWarning,
                      match=r"register\(per_step=\.\.\.\) was removed: set `per_step = True` on "
                                               r"the policy class \(or override `plan`\)"):
        registry = build_registry()
    with pytest.raises(ValueError,
                       match=r"unknown policy 'oldstyle'.*plugin 'old' failed to load: register\(per_"):
        registry.create("oldstyle")


@pytest.mark.parametrize("returned", [4, None])
def test_a_factory_that_returns_no_policy_is_named_not_a_traceback(install, returned):
    """Issue 54: a factory returning an int or None failed deep inside with an AttributeError."""
    def broken(module):
        @hookimpl
        def register_policies(register):
            register("broken", lambda arg, candidates: returned)

        module.register_policies = register_policies

    install("broken-policies", {"broken": _plugin_module("broken_policies", broken)})
    registry = build_registry()
    with pytest.raises(ValueError, match=f"policy 'broken': the factory registered for 'broken' returned "
                                         f"{type(returned).__name__}, not a Policy; fix the plugin"):
        registry.create("broken")


@pytest.mark.parametrize(("name", "message"), [
    ("fixed16:", "ends in ':' with no argument"), ("blockpilot:", "ends in ':' with no argument"),
    ("fixed\u0661\u0666", "a digit outside 0-9"), ("threshold:\u0660.5", "a digit outside 0-9"),
    ("adaptive:\u0661\u0666", "a digit outside 0-9")])
def test_a_policy_name_with_an_empty_argument_or_other_digits_is_refused(name, message):
    """Reported: `fixed16:`, `blockpilot:` and `fixed` with Arabic-Indic digits were accepted (the last as a
    block size of 16); so were such digits after the colon (`threshold:<U+0660>.5` as 0.5)."""
    from specpolicy.registry import create_policy

    with pytest.raises(ValueError, match=message):
        create_policy(name, [1, 2, 4, 8, 16])


@pytest.mark.parametrize("name", sorted(get_registry().families))
def test_every_family_refuses_an_argument_it_cannot_read(name):
    """Found by this stop's audit: ``heuristic:max=99`` and ``oracle-verify:x`` ran and ignored their
    argument; a family reads its argument or refuses it, naming the policy."""
    with pytest.raises((ValueError, OSError), match="zz-9"):  # a missing file named zz-9 too
        get_registry().create(f"{name}:zz-9", (1, 2, 4, 8, 16))
