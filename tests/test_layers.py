"""Layers point one way: light public imports, a core that never names a plugin, models below decoding and
zoo."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "gymnasium")


LIGHT = ["specpolicy", "specpolicy.policy", "specpolicy.hookspecs", "specpolicy.arguments",
         "specpolicy.cycles", "specpolicy.replay.table",
         "specpolicy.costs", "specpolicy.checks", "specpolicy.registry", "specpolicy.sweep.records",
         "specpolicy.evaluation.metrics"]
ORDERS = ["import specpolicy\nimport gymnasium as gym", "import gymnasium as gym\nimport specpolicy",
          "import specpolicy.envs.replay_data\nimport gymnasium as gym"]


def _run_all(programs: list[str]) -> list[subprocess.CompletedProcess]:
    """Each program in a fresh interpreter (imports must not leak between them), run side by side."""
    running = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for code in programs]
    results = []
    for process in running:
        out, err = process.communicate()
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def test_the_policy_contract_and_core_records_import_no_torch_or_gymnasium():
    """One fresh interpreter imports the light modules in turn; none may bring in a heavy library (the
    first module to load one is named)."""
    probe = (f"import importlib, sys\nfor m in {LIGHT!r}:\n    importlib.import_module(m)\n"
             f"    print(m, *(x for x in {HEAVY!r} if x in sys.modules))")
    (result,) = _run_all([probe])
    loaded = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()}
    assert loaded == {m: [] for m in LIGHT}, result.stderr[-2000:]


@pytest.mark.slow  # three fresh interpreters that import gymnasium
def test_environments_are_registered_whichever_is_imported_first():
    checks = [f"{order}\nassert 'specpolicy/BlockSizeStep-v0' in gym.registry\nprint('ok')"
              for order in ORDERS]
    for order, result in zip(ORDERS, _run_all(checks)):
        assert result.stdout.strip() == "ok", (order, result.stderr[-2000:])


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


PACKAGE = ROOT / "specpolicy"
MODEL_STACK = ("torch", "transformers", "specpolicy.decoding", "specpolicy.models", "specpolicy.hf")
"""what model-free work never imports: the core, replay engines, replay evaluation and training sets"""
ABOVE_REPLAY = ("specpolicy.sweep", "specpolicy.evaluation", "specpolicy.training", "specpolicy.plugins",
                "specpolicy.envs", "specpolicy.bench", "specpolicy.zoo", "specpolicy.data")
LAYERS = {
    # package (a folder, or "core" for a top-level module): specpolicy modules it must never import
    # nothing below the CLI knows of it; nothing installed imports
    "*": ("specpolicy.cli", "zoo_build", "benchmarks"),
    # the tooling
    # the contract: no engine,
    "core": (*MODEL_STACK, *ABOVE_REPLAY, "specpolicy.replay", "specpolicy.engines"),
    # plugin or model
    "replay": (*MODEL_STACK, *ABOVE_REPLAY),  # engines that run a Plan with no model: numpy only
    "evaluation": (*MODEL_STACK, "specpolicy.training", "specpolicy.plugins", "specpolicy.envs",
                   "specpolicy.bench",
                   "specpolicy.zoo"),
    "training": (*MODEL_STACK, "specpolicy.evaluation", "specpolicy.envs", "specpolicy.bench",
                 "specpolicy.zoo"),
    "models": ("specpolicy.decoding", "specpolicy.sweep", "specpolicy.evaluation"),
    "decoding": ("specpolicy.sweep", "specpolicy.zoo", "specpolicy.evaluation", "specpolicy.hf"),
    "data": ("specpolicy.models", "specpolicy.decoding", "specpolicy.sweep", "specpolicy.policy"),
    "sweep": ("specpolicy.evaluation", "specpolicy.hf", "specpolicy.registry", "specpolicy.policy"),
    "plugins": ("specpolicy.envs", "specpolicy.decoding", "specpolicy.models", "specpolicy.sweep",
                "specpolicy.evaluation", "specpolicy.hf"),
    "envs": ("specpolicy.plugins", "specpolicy.hf", "specpolicy.bench"),
    "hf": ("specpolicy.sweep", "specpolicy.envs", "specpolicy.bench"),
    "bench": ("specpolicy.envs",),
    "engines": (*MODEL_STACK, *ABOVE_REPLAY, "specpolicy.replay"),  # processes and HTTP: no model, no policy
}
ALLOWED = {  # modules (or layers) allowed what their layer forbids, and why
    "cli": ("specpolicy.cli",),
    "evaluation/live": MODEL_STACK,  # decodes live beside plain AR
    # torch-free: where a pair's folders are, their fingerprints
    "engines/build": ("specpolicy.models.sources",),
}


def _layer(path: Path) -> str:
    """``plugins`` for specpolicy/plugins/fixed.py; ``core`` for a top-level module."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "core"


def _within(module: str, forbidden: str) -> bool:
    """``torch.nn`` is within ``torch``."""
    return module == forbidden or module.startswith(forbidden + ".")


def test_every_package_points_one_way():
    """Every module of the installed package, against its layer's forbidden imports and the global ones."""
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        layer = _layer(path)
        forbidden = (*LAYERS["*"], *LAYERS.get(layer, ()))
        allowed = [a for exempt in (path.stem if layer == "core" else None, layer, f"{layer}/{path.stem}")
                   for a in ALLOWED.get(exempt, ())]
        bad = sorted(name for name in _imports(path)
                     if any(_within(name, f) for f in forbidden)
                     and not any(_within(name, a) for a in allowed))
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_the_layer_check_sees_every_folder():
    """A new folder under specpolicy/ gets a row (or is knowingly left to the global rule)."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - set(LAYERS) <= {"cli", "zoo"}


def test_tensors_cross_to_numpy_in_one_place():
    """Device tensors (CUDA) cannot become numpy without ``.cpu()``: every crossing goes through to_numpy."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name != "features.py":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func,
                                                             ast.Attribute) and node.func.attr == "numpy":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "use specpolicy.features.to_numpy"


def test_to_numpy_takes_any_tensor_to_a_host_array():
    import numpy as np
    import torch

    from specpolicy.features import to_numpy

    assert to_numpy(torch.ones(3, dtype=torch.bfloat16)).dtype == np.float32
    assert to_numpy(torch.arange(3)).tolist() == [0, 1, 2]
    assert to_numpy([1.5]).tolist() == [1.5]


BLOCKED_REPLAY = """
import sys
tried = []
class Blocker:
    def find_spec(self, name, path=None, target=None):
        # seconds of imports each
        if name.split(".")[0] in ("torch", "transformers", "sklearn", "skops", "scipy"):
            tried.append(name)
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, Blocker())
sys.argv = ["specpolicy", "compare", "--sweep", SWEEP, "--policies", POLICIES, "--format", "json"]
from specpolicy.cli import main
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print("TRIED", tried, file=sys.stderr)
"""


def _replay_without_torch(sweep: Path, policies: str) -> subprocess.CompletedProcess:
    code = BLOCKED_REPLAY.replace("SWEEP", repr(str(sweep))).replace("POLICIES", repr(policies))
    return _run_all([code])[0]


def test_compare_of_a_stored_sweep_imports_neither_torch_nor_transformers(replay_store):
    """A subprocess with an import blocker: the replay path never even tries to load the model stack (nor
    scikit-learn and scipy: the learned policies it runs read their weights with numpy)."""
    result = _replay_without_torch(replay_store.path, "fixed16,oracle,oracle-step,adaptive")
    assert result.returncode == 0 and '"policy": "oracle-step"' in result.stdout, result.stderr[-2000:]
    assert "TRIED []" in result.stderr, result.stderr[-2000:]


@pytest.mark.slow  # the shipped 200-prompt sweep with the learned policies (10-20 s)
def test_the_shipped_comparison_with_learned_policies_imports_no_torch():
    sweep = PACKAGE / "zoo" / "tiny" / "sweeps" / "sharegpt"
    result = _replay_without_torch(sweep,
                                   "fixed16,blockpilot,blockpilot-guard,adaptive,cycle,oracle,oracle-step")
    assert result.returncode == 0 and '"policy": "cycle"' in result.stdout, result.stderr[-2000:]
    assert "TRIED []" in result.stderr, result.stderr[-2000:]


@pytest.mark.slow  # the shipped confidence sweep, (B, L) oracle included (5-10 s)
def test_the_engine_rules_run_on_the_shipped_confidence_sweep_without_torch():
    """Issue 37's fresh-install command: the engines' rules and the (B, L) oracle need no sweep of the
    user's."""
    import json

    sweep = PACKAGE / "zoo" / "tiny" / "sweeps" / "sharegpt-verify"
    result = _replay_without_torch(sweep,
                                   "fixed16,vllm-adaptive,trtllm-schedule,blockpilot-guard,oracle-verify")
    assert result.returncode == 0 and "TRIED []" in result.stderr, result.stderr[-2000:]
    rows = {row["policy"]: row for row in json.loads(result.stdout)}
    assert {row["prompts"] for row in rows.values()} == {200}
    assert rows["oracle-verify"]["speedup"] >= max(row["speedup"] for row in rows.values())
