"""Portable learned policies: they predict cycles per token (machine-free) and price them with the cost
table of the machine they run on; sweeps re-price with any table that covers the evaluated sizes."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.costs import CostTable, uniform_costs
from specpolicy.envs.replay_data import shipped_sweep
from specpolicy.training.data import training_set

EVALUATED = (1, 2, 4, 8, 12, 16, 20, 24, 32)


def without(costs: CostTable, sizes: set[int]) -> CostTable:
    """``costs`` with no entry for ``sizes``."""
    data = costs.to_json()
    for key in ("draft_seconds", "verify_seconds", "spread"):
        data[key] = {b: s for b, s in data[key].items() if int(b) not in sizes}
    return CostTable.from_json(data)


def test_a_table_lacking_sizes_outside_the_candidates_reprices_the_shipped_sweep():
    """Reported: re-pricing with a table without 14..18 failed even with --candidates excluding them."""
    store = shipped_sweep("validation")
    costs = without(store.latency(), {14, 15, 17, 18})
    record = next(store.records())
    assert record.table().fastest_fixed(costs, EVALUATED) in EVALUATED
    data = training_set(store, "time", EVALUATED, costs)
    assert data.values.shape == (len(data), len(EVALUATED))


QUIET = Path(__file__).parents[1] / "fixtures" / "costs-quiet-2core.json"
GPU_SHAPED = Path(__file__).parents[1] / "fixtures" / "costs-gpu-shaped-synthetic.json"


def is_flatter(flat: CostTable, steep: CostTable, sizes) -> bool:
    """Every larger block costs ``flat`` no more, relative to a smaller one, than it costs ``steep``."""
    return all(flat.cycle_seconds(b) / flat.cycle_seconds(a)
               <= steep.cycle_seconds(b) / steep.cycle_seconds(a) * (1 + 1e-12)  # to rounding
               for a, b in itertools.combinations(sorted(sizes), 2))


def test_fastest_prices_predictions_with_the_table():
    cycles = np.array([[1.0, 0.3, 0.25], [1.0, 0.9, 0.8]])  # per token, for B = 1, 4, 16
    steep = CostTable({1: 0.0, 4: 1.0, 16: 2.0}, {1: 1.0, 4: 1.5, 16: 2.0}, 1.0)  # cycles of 1, 2.5, 4 s
    # seconds per token 1 / 0.75 / 1; 1 / 2.25 / 3.2
    assert steep.fastest(cycles, (1, 4, 16)).tolist() == [1, 0]
    assert uniform_costs((1, 4, 16)).fastest(cycles, (1, 4, 16)).tolist() == [2, 2]  # fewest cycles
    tie = CostTable({1: 0.0, 2: 0.0}, {1: 1.0, 2: 2.0}, 1.0)
    assert tie.fastest(np.array([[1.0, 0.5]]), (1, 2)).tolist() == [1]  # ties go to the larger block
    with pytest.raises(ValueError, match="no entry for block size 8 "):
        steep.fastest(cycles, (1, 8, 16))


@given(cycles=st.lists(st.floats(0.05, 1.0), min_size=5, max_size=5),
       steps=st.lists(st.floats(0.0, 1.0), min_size=5, max_size=5),
       flattening=st.lists(st.floats(0.0, 0.5), min_size=5, max_size=5))
def test_a_flatter_table_never_chooses_a_smaller_block(cycles, steps, flattening):
    sizes = (1, 2, 4, 8, 16)
    seconds = np.cumsum(np.array(steps) + 0.01)  # a cycle costs more the larger its block
    factor = np.cumprod(1 - np.array(flattening))  # and relatively less on the flatter machine
    steep = CostTable({b: 0.0 for b in sizes}, dict(zip(sizes, seconds.tolist())), 1.0)
    flat = CostTable({b: 0.0 for b in sizes}, dict(zip(sizes, (seconds * factor).tolist())), 1.0)
    assert is_flatter(flat, steep, sizes)
    row = np.array([cycles])
    assert flat.fastest(row, sizes)[0] >= steep.fastest(row, sizes)[0]


def test_the_shipped_blockpilot_reprices_its_choices_with_the_machine_table():
    """Same predictions, three machines: a flatter table never makes it choose smaller blocks."""
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy

    store = shipped_sweep("validation")
    policy = create_policy("blockpilot")
    assert policy.settings.predicts == "cycles_per_token" and policy.validated_with is not None
    records = list(store.records())[:40]
    tables = {"shipped": store.latency(), "quiet": CostTable.load(QUIET), "gpu": CostTable.load(GPU_SHAPED)}
    chosen = {name: np.array(policy.select_batch([prompt_observation(store, r, t) for r in records]))
              for name, t in tables.items()}
    assert is_flatter(tables["gpu"], tables["shipped"], policy.candidates)
    assert is_flatter(tables["gpu"], tables["quiet"], policy.candidates)
    assert (chosen["gpu"] >= chosen["shipped"]).all() and (chosen["gpu"] >= chosen["quiet"]).all()
    assert chosen["gpu"].mean() > chosen["shipped"].mean()  # it re-prices, not keeps one machine's answer
    unpriced = policy.select_batch([prompt_observation(store, r) for r in records])
    assert unpriced == policy.select_batch([prompt_observation(store, r,
                                                               policy.validated_with) for r in records])


def test_portable_predictors_record_what_they_predict_and_the_table_they_were_validated_with(tmp_path):
    from specpolicy.plugins.blockpilot import BlockPilotPolicy, BlockPilotSettings, default_predictor_path
    from specpolicy.policy import TrainingSet

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 1, (80, 16)).astype(np.float32)
    cycles = np.stack([np.ones(80), 0.3 + 0.4 * (logits[:, 0] > 0)], axis=1)  # B = 8 pays off where x0 < 0
    costs = CostTable({1: 0.0, 8: 0.0}, {1: 1.0, 8: 2.0}, 1.0)
    data = TrainingSet(logits, np.full(80, 10), np.zeros(80, dtype=np.int64), 1 / cycles, (1, 8),
                       [f"p{i}" for i in range(80)], costs=costs, cycles_per_token=cycles)
    policy = BlockPilotPolicy(BlockPilotSettings(vocab_size=16, candidates=[1, 8], hidden=16,
                                                 preprocess="logits"))
    summary = policy.fit(data.subset(np.arange(60)), data.subset(np.arange(60, 80)), epochs=80, lr=1e-2)
    assert summary["predicts"] == "cycles_per_token" and summary["validated_with"] == costs.to_json()
    policy.save(tmp_path / "bp")
    loaded = BlockPilotPolicy.load(tmp_path / "bp")
    assert loaded.settings.predicts == "cycles_per_token" and loaded.validated_with == costs
    loaded.validated_with = uniform_costs((1, 8))  # the attribute is what a save writes
    loaded.save(tmp_path / "again")
    assert BlockPilotPolicy.load(tmp_path / "again").validated_with == uniform_costs((1, 8))
    # a classifier saved before `predicts`, `validated_with` and the extractors' names
    legacy = tmp_path / "legacy"
    shutil.copytree(default_predictor_path("blockpilot-paper"), legacy)
    settings = json.loads((legacy / "blockpilot.json").read_text())
    del settings["predicts"], settings["metadata"]["validated_with"]
    settings["preprocess"] = "raw"
    (legacy / "blockpilot.json").write_text(json.dumps(settings))
    paper = BlockPilotPolicy.load(legacy)
    assert paper.settings.predicts == "label" and paper.validated_with is None
    assert paper.settings.preprocess == "logits"


def test_the_shipped_cycle_policy_reprices_its_per_cycle_choices_with_the_machine_table():
    """It once imitated the per-cycle oracle of its training table: 0.55x fixed16 once priced like a GPU."""
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy

    store = shipped_sweep("validation")
    policy = create_policy("cycle", EVALUATED)
    assert policy.predicts == "committed" and policy.validated_with is not None
    records = list(store.records())[:20]
    mean_block = {}
    for name, table in {"shipped": store.latency(), "gpu": CostTable.load(GPU_SHAPED)}.items():
        cycles = [c for r in records
                  for c in r.table().simulate(policy.plan(prompt_observation(store, r, table)))]
        mean_block[name] = np.mean([c.block_size for c in cycles])
    assert mean_block["gpu"] > mean_block["shipped"] + 1  # a flat table buys larger blocks


def test_the_cycle_policy_trains_on_each_sizes_next_tokens_and_keeps_its_table(replay_store, tmp_path):
    from specpolicy.plugins.cycle_learned import CycleLearnedPolicy
    from specpolicy.plugins.skops_io import save_model

    data = training_set(replay_store, "time", (1, 2, 4, 8), replay_store.latency())
    policy = CycleLearnedPolicy((1, 2, 4, 8))
    summary = policy.fit(data, rounds=1)
    assert summary["predicts"] == "committed" and summary["samples"] > 0
    assert policy.validated_with == replay_store.latency()
    policy.save(tmp_path / "c")
    loaded = CycleLearnedPolicy.load(tmp_path / "c")
    assert loaded.predicts == "committed" and loaded.validated_with == policy.validated_with
    from specpolicy.evaluation.replay import prompt_observation

    for record in replay_store.records():  # the loaded predictor decodes every prompt as the trained one
        observation = prompt_observation(replay_store, record, replay_store.latency())
        table = record.table()
        assert table.simulate(loaded.plan(observation)) == table.simulate(policy.plan(observation))
    old = tmp_path / "old"  # saved before the policy was portable: regrets, no table
    save_model(old, policy.model, "cycle_policy.json",
               {"candidates": [1, 2, 4, 8], "start": 16, "history": 6})
    assert CycleLearnedPolicy.load(old).predicts == "regret"
