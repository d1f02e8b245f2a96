"""Comparison as a library: ``specpolicy.evaluation.compare`` from Python, with no CLI and no torch, gives the
rows ``specpolicy compare --sweep`` prints; its options are checked against their own defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specpolicy.costs import uniform_costs
from specpolicy.evaluation.compare import CompareOptions, compare_sweep
from specpolicy.evaluation.export import export_for_engines
from specpolicy.evaluation.serving import evaluate_serving

POLICIES = ["fixed16", "fixed4", "adaptive", "oracle", "oracle-step"]


def test_the_library_gives_the_rows_the_command_prints(replay_store):
    from specpolicy.cli import app

    rows = compare_sweep(replay_store.path, POLICIES)
    printed = CliRunner().invoke(app,
                                 ["compare", "--sweep", str(replay_store.path), "--policies",
                                  ",".join(POLICIES),
                                       "--format", "json"])
    assert printed.exit_code == 0, printed.output
    assert [r.to_dict() for r in rows] == json.loads(printed.stdout)
    assert [r.row.policy for r in rows] == POLICIES and rows[0].row.vs_baseline == pytest.approx(1.0)


def test_it_imports_neither_the_cli_nor_torch(replay_store):
    code = ("import sys; from specpolicy.evaluation.compare import compare_sweep; "
            f"rows = compare_sweep({str(replay_store.path)!r}, ['fixed16', 'oracle'], by='context'); "
            "assert rows and rows[-1].label == 'all'; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('specpolicy.cli')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_two_tables_at_one_context_length_are_refused(replay_store, tmp_path):
    """Issue 48: with two --costs tables at one context length the first silently won (swapping them changed
    tok/s tenfold)."""
    slow, fast = (replace(uniform_costs(replay_store.candidates, s), context_length=512) for s in (0.1, 0.01))
    slow.save(tmp_path / "slow.json")
    fast.save(tmp_path / "fast.json")
    with pytest.raises(ValueError, match="2 tables measured at context 512.*pass one per context length"):
        compare_sweep(replay_store.path, ["fixed16"], costs=[tmp_path / "slow.json", tmp_path / "fast.json"])


def test_options_are_checked_against_their_own_defaults(tmp_path):
    stored = CompareOptions(["fixed16"], sweep=tmp_path, max_samples=12, dtype="bfloat16")
    with pytest.raises(ValueError, match="--max-samples, --dtype would be ignored"):
        stored.validate()
    assert not CompareOptions(["fixed16"]).given("datasets")
    assert CompareOptions(["x"], datasets=["a"]).given("datasets")
    with pytest.raises(ValueError, match="--oracle oracle-step is not among --policies"):
        CompareOptions(["fixed16"], oracle="oracle-step").validate()


def test_candidates_must_be_the_sweeps(replay_store):
    with pytest.raises(ValueError, match=r"missing \[12\]"):
        compare_sweep(replay_store.path, ["fixed12"])
    with pytest.raises(ValueError, match="are not in the sweep's"):
        compare_sweep(replay_store.path, ["fixed16"], candidates=[4, 5])


def test_a_subset_of_the_sweeps_candidates(replay_store):
    rows = {r.row.policy: r.row for r in compare_sweep(replay_store.path, ["fixed4", "oracle", "oracle-step"],
                                                       candidates=[1, 4, 16], baseline="fixed4")}
    assert rows["oracle"].vs_baseline >= 1.0 and rows["oracle-step"].speedup >= rows["oracle"].speedup - 1e-9


def test_learned_policies_choose_among_the_given_candidates():
    """``--candidates`` (a subset of the sweep's) is what a learned policy chooses among, as on an engine: the
    shipped BlockPilot and the default were refused on any set without their trained 20, 24 and 32."""
    sizes = [1, 2, 4, 8, 12, 14, 15, 16]
    rows = compare_sweep("specpolicy/zoo/tiny/sweeps/sharegpt", ["blockpilot", "blockpilot-guard", "fixed16"],
                         candidates=sizes)
    assert {r.row.policy for r in rows} == {"blockpilot", "blockpilot-guard", "fixed16"}
    with pytest.raises(ValueError, match="add them to --candidates"):  # a rule's own blocks stay refused
        compare_sweep("specpolicy/zoo/tiny/sweeps/sharegpt", ["fixed20"], candidates=sizes)


def test_serving_and_its_refusals(replay_store, tmp_path):
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2, 4, 8)).save(tmp_path / "batch.json")
    rows = {r.row.policy: r.row for r in compare_sweep(
        replay_store.path, ["fixed16", "fixed4", "adaptive", "oracle-step"], concurrency=[4],
        batch_costs=tmp_path / "batch.json", oracle="oracle-step")}
    assert rows["fixed16"].timing == "modelled, decode-only, concurrency 4"
    assert rows["oracle-step"].gain_share == 1.0 and rows["fixed16"].vs_baseline == 1.0
    with pytest.raises(ValueError, match="--verify-lengths --confidences"):
        compare_sweep(replay_store.path, ["threshold"])
    with pytest.raises(ValueError, match="drop --costs"):
        compare_sweep(replay_store.path, ["fixed16"], concurrency=[4], batch_costs=tmp_path / "batch.json",
                      costs=[tmp_path / "batch.json"])
    # the refusal names what is missing, not what was given (it said "pass --sweep DIR" beside --sweep)
    with pytest.raises(ValueError, match=r"serving: pass --batch-costs FILE \(a shipped table") as no:
        compare_sweep(replay_store.path, ["fixed16"], concurrency=[4])
    assert "--sweep" not in str(no.value)


def test_served_rows_say_no_oracle_agreement_they_did_not_measure(replay_store, tmp_path):
    """Reported: served at any concurrency, every policy's JSON and CSV said it chose the per-prompt oracle's
    block for 100% of prompts (the simulation recorded no choice and no oracle, 0 and 0, which agreed)."""
    import math

    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2, 4, 8)).save(tmp_path / "batch.json")
    rows = compare_sweep(replay_store.path, ["fixed16", "fixed4", "oracle"], concurrency=[4],
                         batch_costs=tmp_path / "batch.json")
    assert all(math.isnan(r.row.oracle_agreement) for r in rows)
    assert all(r.to_dict()["oracle_agreement"] is None for r in rows)


def test_a_concurrency_past_the_batch_tables_largest_is_refused_before_any_is_served(replay_store, tmp_path,
                                                                                   monkeypatch):
    """Reported: `--concurrency 1,4,16,64,100000` served the first four (3 s) and then named a remeasure on
    this machine, which cannot make a GPU's table."""
    from specpolicy.evaluation import serving
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2, 4, 8)).save(tmp_path / "batch.json")

    def served(*args, **kwargs):
        raise AssertionError("a concurrency was served before the options were checked")

    monkeypatch.setattr(serving, "evaluate_serving", served)
    with pytest.raises(ValueError, match=r"up to 8, not 64: pass --concurrency 1-8"):
        compare_sweep(replay_store.path, ["fixed16"], concurrency=[1, 4, 64],
                      batch_costs=tmp_path / "batch.json")


def test_a_concurrency_the_gpus_kv_cache_cannot_hold_is_refused_naming_it(replay_store):
    """Reported: the shipped H100 table at 8,192 tokens served 64 and 256 requests at once, 310 GB of
    Qwen3-8B's KV cache on an 80 GB GPU; it now prices the 40 its cache holds and says so."""
    with pytest.raises(ValueError, match=r"up to 40, not 64: the KV cache of h100_sxm under vllm .* holds 40 "
                                         r"requests of 8,192 \+ 32 tokens .*; pass --concurrency 1-40, or "
                                         "compose a table for more .* later at a shorter context"):
        compare_sweep(replay_store.path, ["fixed16"], concurrency=[1, 64],
                      batch_costs="aic-h100-sxm-vllm-qwen3-8b-dflash-context-8192")


@pytest.mark.parametrize(("arguments", "refusal"), [
    (["--policies", "fixed4", "--concurrency", "1,64", "--batch-costs",
      "aic-h100-sxm-vllm-qwen3-8b-dflash-context-8192"], "error: the batch cost table"),
    (["--policies", "fixed5"], "error: policy 'fixed5' chooses among [5] but the sweep recorded"),
    (["--policies", "fixed4", "--decode-only"], "error: --decode-only leaves the prefill out of a served"),
    # found by this stop's audit: both were silently ignored by a replay of a stored sweep
    (["--policies", "fixed4", "--server", "/x/llama-server"], "error: --server is the llama-server --engine"),
    (["--policies", "fixed4", "--threads", "4"], "error: --sweep evaluates a stored sweep with its own"),
])
def test_a_refusal_is_the_only_line(replay_store, arguments, refusal):
    """Reproduced: `compare --policies fixed4 --concurrency 1,64` with the H100 table at 8k, or a policy
    whose size the sweep lacks, printed "note: baseline fixed16 is not among the policies" before the
    refusal: the notes came before the store's and the serving checks."""
    from specpolicy.cli import app

    result = CliRunner().invoke(app, ["compare", "--sweep", str(replay_store.path), *arguments])
    assert result.exit_code == 2
    assert result.stderr.startswith(refusal) and result.stderr.count("\n") == 1


@pytest.mark.parametrize(("call", "message"), [
    (lambda p, s, t: export_for_engines(p, s, t, [], "x"), r"--batch-sizes must be distinct counts >= 1"),
    (lambda p, s, t: export_for_engines(p, s, t, "1-4", "x"), r"--batch-sizes must be distinct counts"),
    (lambda p, s, t: export_for_engines("fixed4", s, t, [1], "x"), "policies must be a list of Policy"),
    (lambda p, s, t: evaluate_serving(s, "fixed4", t, 1), "policies must be a list of Policy objects"),
    (lambda p, s, t: evaluate_serving(s, [p], None, 1), r"costs must be a BatchCostTable"),
    (lambda p, s, t: t.check_batches(["a"]), r"--concurrency must be distinct counts >= 1"),
    (lambda p, s, t: t.at_concurrency(1, "4"), r"block_sizes must be a list of block sizes"),
])
def test_the_serving_library_refuses_what_its_commands_refuse(replay_store, call, message):
    """Reproduced: an empty batch list exported an empty document, "1-4" and ["a"] raised TypeError, a
    policy's name or a missing table AttributeError, deep inside."""
    from specpolicy.registry import create_policy
    from specpolicy.replay.batch_costs import BatchCostTable

    table = BatchCostTable.load("aic-h100-sxm-vllm-qwen3-8b-dflash-context-1024")
    with pytest.raises(ValueError, match=message):
        call(create_policy("fixed4", replay_store.candidates), replay_store, table)


def test_rows_by_label(replay_store):
    rows = compare_sweep(replay_store.path, ["fixed16", "fixed4"], by="context")
    assert {r.label for r in rows} == {"<512", "all"}
    with pytest.raises(ValueError, match="carries a category label"):  # was one row per '-'
        compare_sweep(replay_store.path, ["fixed16"], by="category")


def test_a_table_pricing_fewer_sizes_than_the_sweep_names_the_candidates_it_prices(replay_store, tmp_path):
    """Reproduced first: a shipped GPU table lacking one of a sweep's sizes (CAST's H100 table has no B = 20,
    the tiny Spec-Bench sweep has) failed mid-replay, pricing the oracle's range for its agreement column,
    with "remeasure it with bench latency", which no user can do for a published table; --candidates over
    the sizes it prices works."""
    sizes = replay_store.candidates
    uniform_costs([b for b in sizes if b != 8], 0.01, 0.05).save(tmp_path / "gpu.json")
    priced = ",".join(str(b) for b in sizes if b != 8)
    with pytest.raises(ValueError, match=rf"prices no B = \[8\].*\(--candidates {priced}\)"):
        compare_sweep(replay_store.path, ["fixed4"], costs=[tmp_path / "gpu.json"])
    rows = compare_sweep(replay_store.path, ["fixed4"], costs=[tmp_path / "gpu.json"],
                         candidates=[b for b in sizes if b != 8], baseline="fixed4")
    assert [r.row.policy for r in rows] == ["fixed4"]


def test_a_flagged_cost_table_is_warned_of(replay_store, tmp_path):
    """Reported in review: the main job priced a fresh sweep with a table measured while the machine was busy
    (spreads of 35-44%, flagged in latency.json) and printed its speedups without a word."""
    import shutil
    import warnings

    for name, spread in (("noisy", 0.4), ("quiet", 0.05)):
        store = tmp_path / name
        shutil.copytree(replay_store.path, store)
        table = json.loads((store / "latency.json").read_text())
        table["spread"] = {b: spread for b in table["verify_seconds"]}
        table["verify_seconds"] = {b: 0.01 * (1 + int(b) / 16) for b in table["verify_seconds"]}  # monotone
        (store / "latency.json").write_text(json.dumps(table))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compare_sweep(store, ["fixed16", "fixed4"])
        said = [str(w.message) for w in caught if "cost table" in str(w.message)]
        assert bool(said) == (name == "noisy")
        assert all("noisy" in line and "bench latency" in line for line in said)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"concurrency": 4}, "concurrency must be distinct counts >= 1"),
    ({"concurrency": []}, "concurrency must be distinct counts >= 1"),
    ({"concurrency": [0]}, "concurrency must be distinct counts >= 1"),
    ({"concurrency": [2.5]}, "concurrency must be distinct counts >= 1"),
    ({"concurrency": [4, 4]}, "concurrency must be distinct counts >= 1"),
    ({"policies": "fixed8,fixed4"}, "policies must be a list of policy names"),
    ({"policies": []}, "policies must be a list of policy names"),
    ({"policies": [object()]}, "policies must be a list of policy names"),
    ({"sweep": None}, "sweep must be a sweep store's folder"),
    ({"candidates": [4, 4]}, "candidates must name distinct block sizes"),
    ({"candidates": "4,8"}, "candidates must be a list of block sizes"),
    ({"costs": "table.json"}, "costs must be a list of cost tables"),
    ({"costs": Path("table.json")}, "costs must be a list of cost tables"),
])
def test_the_librarys_arguments_are_checked_as_the_command_checks_them(replay_store, arguments, message):
    """Issue 54: TypeError, max() of an empty sequence, ZeroDivisionError, a string read letter by letter."""
    given = {"sweep": replay_store.path, "policies": ["fixed16"]} | arguments
    with pytest.raises(ValueError, match=message):
        compare_sweep(given.pop("sweep"), given.pop("policies"), **given)


def test_tables_at_several_contexts_price_each_cycle_at_the_context_it_starts_at(replay_store):
    """A decode that grows from a short context into a long one pays the long table's price from where it gets
    there (it was priced whole at the prompt's length), plain AR's tokens likewise."""
    from specpolicy.evaluation.replay import evaluate_replay
    from specpolicy.registry import create_policy
    from specpolicy.sweep.store import SweepStore

    store = SweepStore.load(replay_store.path)
    record = next(iter(store.records()))
    middle = record.prompt_length + 8  # the two tables' contexts: the prompt's length, and 16 tokens past it
    short = replace(uniform_costs(store.candidates, 0.01), context_length=record.prompt_length)
    long = replace(uniform_costs(store.candidates, 1.0), context_length=record.prompt_length + 16)
    (result,) = evaluate_replay(store, [create_policy("fixed4", store.candidates)], costs=[short, long])
    cycles, position, seconds, plain = record.table().simulate(4), record.prompt_length, 0.0, 0.0
    for cycle in cycles:
        price = 0.01 if position < middle else 1.0  # nearer the short table's context, or the long one's
        seconds, plain = seconds + price, plain + cycle.committed * price
        position += cycle.committed
    first = result.prompts[0]
    # the decode crosses into the long context
    assert first.prompt_id == record.prompt_id and position > middle
    assert first.seconds == pytest.approx(seconds) and first.ar_seconds == pytest.approx(plain)


def test_an_engine_runs_another_pair_on_a_stored_sweeps_prompts(tmp_path):
    """The cost twin decodes what the tiny pair decodes, so its engine run reads the tiny pair's sweep:
    --target and --drafter name the pair the engine runs beside --sweep, and are refused without --engine."""
    engine = CompareOptions(["fixed16"], sweep=tmp_path, target="twin", drafter="twin", engine="llamacpp")
    engine._validate_where()
    with pytest.raises(ValueError, match="--target, --drafter would be ignored"):
        CompareOptions(["fixed16"], sweep=tmp_path, target="twin", drafter="twin")._validate_where()


def test_the_map_says_whether_it_prices_prefills(replay_store):
    """Issue 75: every map says which view it shows: a request's prefill and decode steps where the serving
    table prices prefills (the shipped aiconfigurator tables), else (or --decode-only) decode steps only."""
    from specpolicy.cli import app

    table = "aic-h200-sxm-vllm-qwen3-8b-dflash-context-1024"
    base = ["compare", "--sweep", str(replay_store.path), "--policies", "fixed16,fixed4",
            "--concurrency", "1,16", "--batch-costs", table]
    whole, decode = (CliRunner().invoke(app, [*base, *extra]) for extra in ([], ["--decode-only"]))
    assert whole.exit_code == decode.exit_code == 0, whole.output + decode.output
    assert "modelled, prefill + decode time, concurrency 1,16" in " ".join(whole.stdout.split())
    assert "modelled, decode-only time, concurrency 1,16" in " ".join(decode.stdout.split())
    assert "--decode-only leaves prefills out" in " ".join(whole.stderr.split())


def test_one_served_concurrency_names_the_batch_table_that_priced_it(replay_store):
    """Found by this stop's audit: `compare --concurrency 4 --batch-costs TABLE` said it was priced by "the
    sweep's own table", which served nothing; the title names the batch table."""
    from specpolicy.cli import app

    table = "aic-h200-sxm-vllm-qwen3-8b-dflash-context-1024"
    result = CliRunner().invoke(app, ["compare", "--sweep", str(replay_store.path), "--policies",
                                      "fixed16,fixed4", "--concurrency", "4", "--batch-costs", table])
    assert result.exit_code == 0, result.output
    title = " ".join(result.stdout.split())
    assert f"concurrency 4 ({table})" in title and "own table" not in title
