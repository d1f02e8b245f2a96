"""``specpolicy tune``: settings from a grid, the best on the training side held out beside the defaults."""

from __future__ import annotations

import pytest

from specpolicy.evaluation.tune import parse_grid, settings, tune
from specpolicy.plugins.engine_rules import engine_terms
from specpolicy.registry import create_policy

ZOO = "specpolicy/zoo/tiny/sweeps/sharegpt"


def test_the_grid_names_every_setting_and_draws_a_seeded_budget():
    grid = parse_grid(["window_size=2,4,8", "tpc_threshold=3,3.5"])
    names = settings("dflash-mlx", grid)
    assert len(names) == 6 and "dflash-mlx:window_size=8,tpc_threshold=3.5" in names
    drawn = settings("dflash-mlx", grid, draws=3, seed=1)
    assert len(drawn) == 3 and set(drawn) <= set(names) and drawn == settings("dflash-mlx", grid, 3, 1)


@pytest.mark.parametrize(("rule", "grid", "message"), [
    ("dflash-mlx", ["window_size"], "NAME=V1,V2"),
    ("dflash-mlx", ["window_size=2", "window_size=4"], "once per parameter"),
    ("dflash-mlx", ["window_size=0,4"], "window_size"),
    ("dflash-mlx", ["depth=3"], "no parameter 'depth'"),
    ("dflash-mlx:window_size=2", ["tpc_threshold=3"], "a rule's name"),
    ("fixed16", ["x=1"], "fixed"),
    # found by this stop's audit: a repeated value was refused after the progress line as "--policies names
    # ... twice", an option tune does not have
    ("llamacpp-pmin", ["n_max=3,3"], r"--grid names n_max=3 twice"),
])
def test_bad_grids_are_refused_before_any_replay(rule, grid, message):
    with pytest.raises(ValueError, match=message):
        settings(rule, parse_grid(grid))


def test_tune_holds_the_training_sides_best_out_beside_the_defaults_and_the_best_fixed_block():
    names = settings("dflash-mlx-count", parse_grid(["min_block_tokens=1,2,4"]))
    tuned = tune(ZOO, "dflash-mlx-count", names, fixed=[1, 2, 4, 8, 16])
    assert tuned.setting in [*names, "dflash-mlx-count"] and tuned.tried == 3
    rows = {r.policy: r for r in tuned.held_out}
    assert tuned.setting in rows and "dflash-mlx-count" in rows and any(p.startswith("fixed") for p in rows)
    assert rows["dflash-mlx-count"].vs_baseline == 1.0
    assert "min_block_tokens = " in tuned.terms and "full_block_tokens = 16" in tuned.terms


def test_engine_terms_speak_each_engines_language():
    sglang = engine_terms(create_policy("sglang-adaptive:candidate_steps=1/3/7", (1,)).controller)
    assert '"1": {"candidate_steps": [1, 3, 7]' in sglang and '"64": {"candidate_steps": [0]' in sglang
    assert "--speculative-num-steps 3" in sglang
    streak = engine_terms(create_policy("llamacpp-streak:threshold=5", (1,)).controller)
    assert "--spec-draft-adaptive-length-threshold 5" in streak
    assert "MISTRALRS_DFLASH_ADAPTIVE=1" in engine_terms(create_policy("mistralrs-dflash", (1,)).controller)


def test_llama_cpps_stock_flags_tune_and_come_back_as_its_flags():
    """llama.cpp's own draft and p_min flags are a rule its server runs as written: tuned, they print as
    flags for ``llama-server``."""
    assert create_policy("llamacpp-pmin:n_max=7,p_min=0.5", (1,)).engine_terms() == \
        "--spec-draft-n-max 7 --spec-draft-p-min 0.5"
    names = settings("llamacpp-pmin", parse_grid(["n_max=1,3,7"]))
    tuned = tune(ZOO, "llamacpp-pmin", names, fixed=[1, 2, 4, 8])
    assert tuned.terms.startswith("--spec-draft-n-max ") and tuned.terms.endswith(" --spec-draft-p-min 0.0")


def test_a_seed_without_draws_is_refused():
    """Found by this stop's audit: ``tune --seed 3`` without ``--draws`` replayed the whole grid."""
    with pytest.raises(ValueError, match="--seed draws the --draws settings"):
        settings("dflash-mlx", parse_grid(["window_size=2,4"]), seed=3)
