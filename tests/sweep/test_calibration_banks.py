"""Calibration banks (acceptance.parquet + speculator.parquet, inference-lab's schema): imported as rounds,
replayed per round, refused in one line when they cannot be."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.costs import CostTable
from specpolicy.cycles import Plan
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.registry import create_policy
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.sweep.traces import TraceArgs, import_traces

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DRAFTS = 3  # a block of 4
# (category, prompt, turn, round) -> (accept, confidences of the 3 drafts)
ROUNDS = {
    ("code", 0, 0, 0): (3, [0.9, 0.8, 0.7]),
    ("code", 0, 0, 1): (0, [0.2, 0.9, 0.9]),
    ("code", 0, 0, 2): (2, [0.95, 0.5, 0.1]),
    ("qa", 4, 1, 0): (1, [0.6, 0.3, 0.9]),
}


def write_bank(folder, rounds=ROUNDS, run=("qwen3.6", "dflash@42d3b34d", "t0.6"), mask=None, shuffle=True,
               drop=()):
    """Both banks of ``rounds`` in the schema (rows in another order in each, as two writers may leave
    them); ``mask``: accept masks in place of the prefix; ``drop``: columns left out of acceptance.parquet."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(rounds)
    runs = [run(k) if callable(run) else run for k in keys]

    def columns(order):
        return {"model": [runs[i][0] for i in order], "speculator": [runs[i][1] for i in order],
                "config": [runs[i][2] for i in order], "category": [keys[i][0] for i in order],
                "prompt_idx": [keys[i][1] for i in order], "turn": [keys[i][2] for i in order],
                "round_idx": [keys[i][3] for i in order]}

    order = list(range(len(keys)))
    verify = columns(order) | {"accept": [rounds[keys[i]][0] for i in order]}
    for k in range(DRAFTS + 1):  # null-padded past the drafts, as shallower drafters leave it
        verify[f"acc{k}"] = [None if k >= DRAFTS else (mask or {}).get(keys[i], [int(k < rounds[keys[i]][0])
                             for k in range(DRAFTS)])[k] for i in order]
    order = order[::-1] if shuffle else order
    draft = columns(order) | {f"conf{k}": [rounds[keys[i]][1][k] if k < DRAFTS else None for i in order]
                              for k in range(DRAFTS + 1)}
    pq.write_table(pa.table({k: v for k, v in verify.items() if k not in drop}),
                   folder / "acceptance.parquet")
    pq.write_table(pa.table(draft), folder / "speculator.parquet")
    return folder / "acceptance.parquet"


def test_rounds_become_one_decode_per_prompt_turn_in_round_order(tmp_path):
    bank = write_bank(tmp_path / "speedbench" / "dflash@42d3b34d" / "acceptance")
    result = import_traces(bank, tmp_path / "store")
    store = result.store
    assert store.meta["format"] == "calibration-bank" and store.meta["dataset"] == "speedbench"
    assert store.candidates == (4,) and store.meta["confidence_sizes"] == [4]
    assert store.meta["drafter_kind"] == "block" and store.meta["drafter"] == "dflash@42d3b34d"
    records = {r.prompt_id: r for r in store.records()}
    assert sorted(records) == ["code:0:0", "qa:4:1"] and records["qa:4:1"].conversation == "qa:4"
    table = records["code:0:0"].table()
    assert table.rounds and table.accepted[:, 0].tolist() == [3, -1, -1, -1, 0, 2, -1, -1, -1]
    assert table.drafted_block(table.prompt_length + 4, 4).confidences == pytest.approx((0.2, 0.9, 0.9), 1e-3)
    assert "per round" in result.exact_for


def test_each_round_replays_on_its_own_with_the_rules_verify_length(tmp_path):
    store = import_traces(write_bank(tmp_path / "bank"), tmp_path / "store").store
    table = next(r for r in store.records() if r.prompt_id == "code:0:0").table()
    # p_min 0.75: verify up to the first draft below it -> L = 3 (0.9, 0.8 kept), 1, 2
    cycles = table.simulate(create_policy("llamacpp-pmin:n_max=3,p_min=0.75", [4]).plan(_observation()))
    assert [(c.verify_length, c.accepted, c.committed) for c in cycles] == [(3, 2, 3), (1, 0, 1), (2, 1, 2)]
    whole = table.simulate(Plan.fixed(4))  # whole blocks: the recorded decode, 4 + 1 + 3 tokens
    assert [c.committed for c in whole] == [4, 1, 3]


def _observation():
    from specpolicy.policy import PromptObservation

    return PromptObservation(np.zeros(0, np.float32), 0)


def test_a_cut_round_commits_less_and_pays_less_in_the_comparison(tmp_path):
    store = import_traces(write_bank(tmp_path / "bank"), tmp_path / "store").store
    costs = CostTable({1: 0.0, 2: 0.0, 3: 0.0, 4: 1.0}, {1: 1.0, 2: 1.5, 3: 2.0, 4: 2.5}, 1.0)
    policies = [create_policy(name, [4]) for name in ("fixed4", "llamacpp-pmin:n_max=3,p_min=0.75")]
    fixed, cut = evaluate_replay(store, policies, costs=costs)
    # code:0:0 cut at L = 3, 1, 2: 6 tokens for (1 + 2) + (1 + 1) + (1 + 1.5) seconds; whole: 8 for 3 x 3.5
    prompt = next(p for p in cut.prompts if p.prompt_id == "code:0:0")
    assert (prompt.tokens, prompt.seconds, prompt.ar_seconds) == (6, pytest.approx(7.5), 6.0)
    assert next(p for p in fixed.prompts if p.prompt_id == "code:0:0").seconds == pytest.approx(10.5)


def test_import_and_compare_from_the_command_line(tmp_path):
    bank = write_bank(tmp_path / "bank")
    runner = CliRunner()
    result = runner.invoke(app, ["import-traces", str(bank), "--out", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert "per round" in result.output
    result = runner.invoke(app, ["compare", "--sweep", str(tmp_path / "store"), "--costs",
                                 "aic-h200-sxm-sglang-qwen3-8b-dflash-context-1024", "--policies",
                                 "fixed4,threshold:0.5,marginal", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {"fixed4", "threshold:0.5", "marginal"} <= set(result.output.split('"'))


@pytest.mark.parametrize(("damage", "message"), [
    ({"run": lambda key: ("m", "dflash", key[0])}, "mixes 2 runs"),
    ({"mask": {("code", 0, 0, 0): [1, 0, 1]}}, "not the prefix of accept drafts"),
    ({"rounds": ROUNDS | {("qa", 4, 1, 1): (5, [0.5, 0.5, 0.5])}}, "accept must be an integer in 0..3"),
    ({"rounds": ROUNDS | {("qa", 4, 1, 1): (1, [0.5, 1.5, 0.5])}}, "outside [0, 1]"),
    ({"drop": ("accept",)}, "lacks the columns ['accept']"),
])
def test_a_bank_that_cannot_replay_is_refused_in_one_line(tmp_path, damage, message):
    bank = write_bank(tmp_path / "bank", **damage)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")) as error:
        import_traces(bank, tmp_path / "store")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "store").exists()


def test_banks_of_two_runs_and_a_missing_half_are_refused(tmp_path):
    bank = write_bank(tmp_path / "bank")
    other = write_bank(tmp_path / "other", rounds={("code", 0, 0, 0): ROUNDS["code", 0, 0, 0]})
    (tmp_path / "bank" / "speculator.parquet").write_bytes((other.parent / "speculator.parquet").read_bytes())
    with pytest.raises(ValueError, match="hold different rounds"):
        import_traces(bank, tmp_path / "store")
    (tmp_path / "bank" / "speculator.parquet").unlink()
    with pytest.raises(ValueError, match="speculator.parquet is missing"):
        import_traces(bank, tmp_path / "store")
    with pytest.raises(ValueError, match="a block of 4; pass --candidates 4"):
        import_traces(other, tmp_path / "store", TraceArgs(candidates=[8]))


def test_a_damaged_bank_or_a_missing_pyarrow_is_refused_in_one_line(tmp_path, monkeypatch):
    bank = write_bank(tmp_path / "bank")
    good = bank.read_bytes()
    bank.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="acceptance.parquet is not a readable parquet file"):
        import_traces(bank, tmp_path / "store")
    bank.write_bytes(good)
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)
    with pytest.raises(ValueError, match=r"needs pyarrow: pip install 'specpolicy\[calibration\]'"):
        import_traces(bank, tmp_path / "store")


def test_served_rounds_take_the_recordings_next_round_after_a_cut(tmp_path):
    """The serving simulation replays a store of rounds as replay does: a cut round commits less and the next
    cycle is the recording's next round (no anchor the recording never reached)."""
    from specpolicy.evaluation.compare import compare_sweep

    import_traces(write_bank(tmp_path / "bank"), tmp_path / "store")
    rows = compare_sweep(tmp_path / "store", ["fixed4", "llamacpp-pmin:n_max=3,p_min=0.75"], concurrency=[2],
                         batch_costs="aic-h200-sxm-sglang-qwen3-8b-dflash-context-1024")
    tau = {r.row.policy: r.row.tau for r in rows}
    assert tau["llamacpp-pmin:n_max=3,p_min=0.75"] < tau["fixed4"]  # the cuts commit less per round


def test_a_bank_named_by_a_relative_path_keeps_its_datasets_name(tmp_path, monkeypatch):
    bank = write_bank(tmp_path / "humaneval" / "mtp" / "acceptance")
    monkeypatch.chdir(bank.parent)
    assert import_traces("acceptance.parquet", tmp_path / "store").store.meta["dataset"] == "humaneval"


def test_served_speedups_of_a_store_of_rounds_count_plain_decodings_tokens(tmp_path):
    """Reported: served through the batch simulation, every policy over a store of rounds was its batch-one
    speedup divided by tau: plain decoding walks the recorded rounds a token at a time, so it served fewer
    tokens than the policy, and the policy's tokens were priced at plain's seconds for fewer."""
    from specpolicy.evaluation.compare import compare_sweep

    store = import_traces(write_bank(tmp_path / "bank"), tmp_path / "store").store
    table = "aic-h200-sxm-sglang-qwen3-8b-dflash-context-1024"
    served = compare_sweep(store.path, ["fixed4"], concurrency=[1], batch_costs=table, baseline="fixed4",
                           decode_only=True)  # the decode steps priced by hand below
    batch = BatchCostTable.load(table)
    plain_step, block_step = (batch.step_seconds([(size, size)]) for size in (1, 4))
    row = served[0].row
    tokens, cycles = sum(a + 1 for a, _ in ROUNDS.values()), len(ROUNDS)  # fixed4 commits accept + 1 a round
    assert row.speedup == pytest.approx(tokens * plain_step / (cycles * block_step), rel=1e-6)


@pytest.mark.parametrize(("speculator", "kind"), [("dspark@1a2b", "block"), ("DFlash-b16", "block"),
                                                  ("mtp", "chain"), ("eagle3@9f", "chain")])
def test_a_banks_drafter_kind_follows_how_its_speculator_drafts(tmp_path, speculator, kind):
    """Reported: a dspark bank (a block drafter) was imported as a chain drafter, the kind guessed from
    whether the speculator's name holds "dflash"."""
    bank = write_bank(tmp_path / "bank", run=("qwen3.6", speculator, "t0.6"))
    assert import_traces(bank, tmp_path / "store").store.meta["drafter_kind"] == kind
