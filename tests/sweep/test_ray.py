"""Scale-out on Ray: the same store, sharded over a local 2-CPU Ray instance."""

from __future__ import annotations

import sys

import pytest

from specpolicy.data.registry import load_prompts
from specpolicy.sweep.settings import SweepSettings
from tests.conftest import STORE_CANDIDATES

pytestmark = pytest.mark.ray


def test_without_ray_the_executor_fails_with_an_install_hint(monkeypatch, tmp_path):
    from specpolicy.sweep.ray_executor import run_sweep_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RuntimeError, match=r"pip install 'specpolicy\[ray\]'"):
        run_sweep_ray(SweepSettings(), str(tmp_path / "s"), [])


def test_ray_sweep_matches_a_local_sweep(test_zoo, prompt_file, replay_store, tmp_path):
    ray = pytest.importorskip("ray")
    from specpolicy.sweep.ray_executor import run_sweep_ray

    target, drafter = test_zoo
    settings = SweepSettings(dataset=str(prompt_file), candidates=list(STORE_CANDIDATES), max_new_tokens=24,
                             max_samples=None, target=str(target),
                             drafter=str(drafter))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        store = run_sweep_ray(settings, str(tmp_path / "ray"), load_prompts(str(prompt_file)), shard_size=3)
    finally:
        ray.shutdown()
    local = {r.prompt_id: r.taus for r in replay_store.records()}
    remote = {r.prompt_id: r.taus for r in store.records()}
    assert remote == local
