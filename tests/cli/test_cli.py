"""The command line: policies, sweep, train, compare (every format) and bad input."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from specpolicy.cli import app

runner = CliRunner()


def run(*args: str, ok: bool = True):
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def zoo_args(test_zoo) -> list[str]:
    target, drafter = test_zoo
    return ["--target", str(target), "--drafter", str(drafter)]


@pytest.fixture()
def quiet_machine(monkeypatch):
    """compare's own sweeps measure a clean cost table: a busy machine's flagged one is never cached (it is
    measured again next run), so a test comparing two runs would compare two measurements."""
    from specpolicy.costs import uniform_costs
    from specpolicy.sweep import run as sweep_run

    monkeypatch.setattr(sweep_run, "measure_costs",
                        lambda decoder, sizes, **k: uniform_costs(sizes, 0.01, 0.1))


def test_policies_table_and_json():
    assert "blockpilot" in run("policies").output
    rows = json.loads(run("policies", "--format", "json").output)
    # plugins installed here may add rows
    ours = {r["name"] for r in rows if r["distribution"] == "specpolicy"}
    assert {"fixed", "blockpilot", "oracle", "oracle-step", "random", "heuristic", "logreg"} <= ours
    assert {"learned", "plugin"} <= set(rows[0])  # details live behind --format


def test_policies_table_fits_a_100_column_terminal(monkeypatch):
    """It was 203 lines at 100 columns (seven columns folded); now a family fits two lines at most."""
    import io

    from rich.console import Console

    from specpolicy.cli import common

    screen = io.StringIO()
    monkeypatch.setattr(common, "stdout",
                        Console(file=screen, width=100, force_terminal=True, color_system=None))
    run("policies")
    lines = screen.getvalue().splitlines()
    families = len(json.loads(run("policies", "--format", "json").output))
    assert max(len(line) for line in lines) <= 100 and "plugin" not in lines[1] + lines[2]
    assert len(lines) <= 5 + 2 * families


@pytest.fixture(scope="module")
def trained_policy(replay_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("policy") / "bp"
    result = run("train", "blockpilot", "--sweep", replay_store.path, "--out", out, "--hidden", "32",
                 "--epochs", "5", "--lr", "1e-3")
    summary = json.loads(result.stdout)
    assert summary["train_prompts"] + summary["validation_prompts"] == 8
    return out


@pytest.mark.slow
def test_train_sklearn_baseline(replay_store, tmp_path):
    result = run("train", "logreg", "--sweep", replay_store.path, "--out", tmp_path / "lr", "--label", "tau")
    assert "train_accuracy" in json.loads(result.stdout)
    assert (tmp_path / "lr" / "model.skops").exists()


@pytest.mark.parametrize(("family", "options", "named"), [
    ("logreg", ["--epochs", "5"], "--epochs"),
    ("forest", ["--hidden", "64", "--lr", "0.1"], "--hidden, --lr"),
    ("cycle", ["--objective", "expected_value"], "--objective"),
])
def test_train_refuses_options_the_family_does_not_read(replay_store, tmp_path, family, options, named):
    """`train logreg --epochs 5` once trained anyway, silently ignoring --epochs."""
    result = run("train", family, "--sweep", replay_store.path, "--out", tmp_path / "p", *options, ok=False)
    assert result.exit_code == 2
    assert f"{family} does not read {named}" in result.output
    assert not (tmp_path / "p").exists()


# slow: renderings
FORMATS = ["table", "json", *(pytest.param(f, marks=pytest.mark.slow) for f in ("csv", "markdown"))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_compare_every_format(replay_store, trained_policy, fmt, tmp_path):
    policies = f"fixed16,blockpilot:{trained_policy},oracle,oracle-step,heuristic,random"
    result = run("compare", "--policies", policies, "--sweep", replay_store.path, "--format", fmt, "--plot",
                 tmp_path / "plot.png")
    assert "oracle-step" in result.stdout
    assert (tmp_path / "plot.png").stat().st_size > 0
    if fmt == "json":
        rows = {r["policy"]: r for r in json.loads(result.stdout)}
        assert rows["fixed16"]["delta_tau"] == 0 and rows["fixed16"]["vs_baseline"] == 1.0
        # the time oracle is the fastest per prompt, the per-cycle oracle the fastest per cycle
        assert rows["oracle"]["vs_baseline"] >= 1.0 and rows["oracle"]["gain_share"] == 1.0
        assert rows["oracle-step"]["speedup"] >= rows["oracle"]["speedup"] - 1e-9
        assert rows["oracle"]["oracle_agreement"] == 1.0
        assert rows["fixed16"]["timing"] == "modelled"


def test_compare_runs_its_own_replay_sweep(test_zoo, prompt_file, tmp_path, monkeypatch, quiet_machine):
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    args = ["compare", "--policies", "fixed16,oracle", "--dataset", prompt_file, "--max-samples", "3",
            "--max-new-tokens", "12", "--format", "json", *zoo_args(test_zoo)]
    result = run(*args)
    first = json.loads(result.stdout)
    assert [r["prompts"] for r in first] == [3, 3]
    # the cache path has a line of its own; the progress label stays short (it filled a 100-column bar)
    progress = [line for line in result.stderr.splitlines() if line.startswith("sweep ")]
    assert progress and all(line.startswith("sweep prompts.txt: ") for line in progress)
    assert "into compare's cache" in result.stderr
    assert str(tmp_path / "cache") in "".join(result.stderr.split())
    assert json.loads(run(*args).stdout) == first  # the cached sweep is reused


def test_compare_live_mode(test_zoo, prompt_file, tmp_path):
    result = run("compare", "--policies", "fixed16,heuristic", "--mode", "live", "--dataset", prompt_file,
                 "--max-samples", "2", "--max-new-tokens", "10", "--format", "json",
                 *zoo_args(test_zoo))
    rows = json.loads(result.stdout)
    assert {r["timing"] for r in rows} == {"measured"}
    assert all(r["speedup"] > 0 and r["tokens_per_s"] > 0 for r in rows)


def test_compare_live_warns_on_a_flagged_cost_table(test_zoo, prompt_file, tmp_path):
    """Reproduced first: replay warned about a flagged --costs table, live decoding used it without a word."""
    from specpolicy.costs import uniform_costs

    table = uniform_costs(range(1, 65), ar_seconds=0.01, per_token=0.1).to_json() | {"spread": {"16": 0.5}}
    (tmp_path / "noisy.json").write_text(json.dumps(table))
    result = run("compare", "--policies", "fixed16,adaptive", "--mode", "live", "--dataset", prompt_file,
                 "--max-samples", "1", "--max-new-tokens", "6", "--costs", tmp_path / "noisy.json",
                 *zoo_args(test_zoo))
    assert "noisy.json is flagged (noisy" in " ".join(result.stderr.split())


def test_sweep_command_and_resume(test_zoo, prompt_file, tmp_path):
    args = ["sweep", "--dataset", prompt_file, "--candidates", "4-6", "--max-samples", "2",
            "--max-new-tokens", "8",
            "--out", tmp_path / "s", *zoo_args(test_zoo)]
    run(*args)
    result = run(*args)
    assert "2 prompts recorded" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "--policies", "fixd16"], "Did you mean 'fixed16'"),
        (["compare", "--policies", "blockpilot:/no/such/dir"], "blockpilot.json is missing"),
        (["compare", "--mode", "fast"], "is not one of"),
        (["sweep", "--out", "/tmp/x", "--candidates", "16,80"],
         "--candidates: block size must be an integer in 1..64"),
        (["compare", "--candidates", "1,65"], "--candidates: block size must be an integer in 1..64"),
        (["sweep", "--out", "/tmp/x", "--candidates", "a,b"], "--candidates must look like"),
        (["sweep", "--out", "/tmp/x", "--confidences", "a,b"], "--confidences must look like"),
        (["export", "blockpilot-guard", "--sweep", "/tmp/x", "--batch-costs", "/tmp/y", "--batch-sizes", "x"],
         "--batch-sizes must look like"),
        (["bench", "batch-latency", "--batch-sizes", "0,2"], "--batch-sizes must be distinct"),
        (["sweep", "--out", "/tmp/x", "--dataset", "nope"], "unknown dataset 'nope'"),
        (["generate", " "], "empty prompt"),
        (["compare", "--allow-noisy"], "No such option: --allow-noisy"),
        (["compare", "--by", "context"], "--by context reads each stored prompt's length: pass --sweep DIR"),
        (["compare", "--mode", "live", "--costs", "a.json,b.json"], "live decoding reads one table"),
        (["generate", "hi", "-b", "4", "--target", "/no/such/model"], "neither a zoo name"),
        (["generate", "hi", "--draft-sampling"], "--draft-sampling needs --temperature > 0"),
        (["compare", "--concurrency", "8"], "pass --sweep DIR (a stored sweep) and --batch-costs FILE"),
        (["compare", "--costs", " , "], "--costs names no table"),  # was taken as no --costs at all
        (["export", "fixed16", "--sweep", "/tmp/x"], "serving: pass --batch-costs FILE (a shipped table"),
        (["sweep", "--out", "/tmp/x", "--candidates", "4,8", "--confidences", "16"],
         "--confidences [16] are not"),
    ],
)
def test_bad_input_fails_with_a_clear_message(args, message):
    result = run(*args, ok=False)
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())


def test_train_with_a_missing_sweep(tmp_path):
    result = run("train", "blockpilot", "--sweep", tmp_path / "none", "--out", tmp_path / "o", ok=False)
    assert "is not a sweep store" in result.output


def test_generate_on_the_test_zoo(test_zoo):
    result = run("generate", "Say hello", "--max-new-tokens", "12", "--block-size", "4", *zoo_args(test_zoo))
    assert "block size 4 (fixed)" in result.stderr and "tau" in result.stderr
    result = run("generate", "Say hello", "--max-new-tokens", "12", "--policy", "heuristic",
                 *zoo_args(test_zoo))
    assert "(heuristic)" in result.stderr
    result = run("generate", "Say hello", "--max-new-tokens", "12", "-b", "4", "--temperature", "1",
                 "--draft-sampling", *zoo_args(test_zoo))
    assert "block size 4 (fixed)" in result.stderr


def test_generate_runs_a_policys_verify_lengths(test_zoo, monkeypatch, tmp_path):
    from specpolicy.decoding import engine

    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path))
    original, traces = engine.decode, []

    def spy(*args, **kwargs):
        traces.append(original(*args, **kwargs))
        return traces[-1]

    monkeypatch.setattr(engine, "decode", spy)
    run("generate", "Say hello", "--max-new-tokens", "16", "--policy", "threshold:0.9", *zoo_args(test_zoo))
    cycles = traces[-1].cycles
    assert cycles and any(c.verify_length < c.block_size for c in cycles)  # the threshold cut blocks


def test_generate_with_a_sweep_only_policy_fails(test_zoo):
    result = run("generate", "hi", "--policy", "oracle", *zoo_args(test_zoo), ok=False)
    text = " ".join(result.output.split())
    # the fix works here: generate has no --mode (it said "use --mode replay")
    assert "cannot decode live" in text and "--mode" not in text and "specpolicy compare --sweep DIR" in text


def test_compare_maps_speed_over_groups_and_concurrencies(replay_store, tmp_path):
    """Issue 37's map: one run over a list of concurrencies; a compact grid, every figure in CSV, a heat
    map."""
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2, 4, 8)).save(tmp_path / "batch.json")
    args = ["compare", "--policies", "fixed16,fixed4,oracle-step", "--sweep", replay_store.path,
            "--concurrency",
            "1,4,8", "--batch-costs", tmp_path / "batch.json"]
    mapped = run(*args, "--plot", tmp_path / "map.png")
    grid = " ".join(mapped.stdout.split())
    assert "c=1" in grid and "c=8" in grid and "8 prompts" in grid and (tmp_path / "map.png").stat().st_size
    assert "(modelled, decode-only; --decode-only leaves prefills out)" in " ".join(mapped.stderr.split())
    rows = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv").stdout)))
    assert {(r["policy"], r["concurrency"]) for r in rows} == {
        (p, c) for p in ("fixed16", "fixed4", "oracle-step")
                                                             for c in ("1", "4", "8")}
    # a cell holding a list is its JSON, as --format json writes it (it was Python's "[None, None]")
    assert [json.loads(r["gain_share_ci95"]) for r in rows] == [[None, None]] * len(rows)
    assert all(len(json.loads(r["speedup_ci95"])) == 2 for r in rows)


@pytest.mark.slow  # sweeps with the test pair
def test_compare_by_category_on_a_users_jsonl(test_zoo, tmp_path, monkeypatch, quiet_machine):
    """A row per category and policy plus the overall rows; the sweep keeps the labels, so --sweep can split
    too."""
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "labelled.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"{c}{i}", "prompt": text, "category": c})
                              for c, texts in (("code", ["def add(a, b):", "Sort a list."]),
                                               ("chat", ["Say hello.", "Write a haiku.", "List colours."]))
                              for i, text in enumerate(texts)) + "\n")
    args = ["compare", "--policies", "fixed16,fixed4,oracle", "--dataset", data, "--candidates", "1,4,16",
            "--max-new-tokens", "12", *zoo_args(test_zoo)]
    rows = json.loads(run(*args, "--by", "category", "--format", "json", "--plot",
                          tmp_path / "by.png").stdout)
    prompts = {(r["category"], r["policy"]): r["prompts"] for r in rows}
    assert prompts == {(c, p): n for c, n in (("chat", 3), ("code", 2), ("all", 5))
                       for p in ("fixed16", "fixed4", "oracle")}
    overall = {r["policy"]: r["speedup"] for r in rows if r["category"] == "all"}
    assert overall == {r["policy"]: r["speedup"] for r in json.loads(run(*args, "--format", "json").stdout)}
    assert (tmp_path / "by.png").stat().st_size > 0
    store = next((tmp_path / "cache" / "sweeps").iterdir())
    by_group = json.loads(run("compare", "--policies", "fixed16", "--sweep", store, "--by", "group",
                              "--format",
                              "json").stdout)
    assert [(r["group"], r["prompts"]) for r in by_group] == [("chat", 3), ("code", 2), ("all", 5)]
    assert "use --by category, group or context" in run("compare", "--by", "topic", ok=False).output


@pytest.mark.slow  # sweeps with the test pair
def test_a_live_mode_store_compares_with_its_measured_times(test_zoo, prompt_file, tmp_path):
    """Reported: `sweep --mode live --candidates 1,4,16` then compare failed ("no tau for block size 1"), and
    without 1 printed a table of "-"."""
    run("sweep", "--mode", "live", "--dataset", prompt_file, "--candidates", "1,4,16", "--max-samples", "3",
        "--max-new-tokens", "8", "--out", tmp_path / "live", *zoo_args(test_zoo))
    rows = json.loads(run("compare", "--policies", "fixed16,fixed4,fixed1,oracle", "--sweep",
                          tmp_path / "live",
                          "--format", "json").stdout)
    assert {r["timing"] for r in rows} == {"measured"}
    speed = {r["policy"]: r["speedup"] for r in rows}
    assert speed["fixed1"] == pytest.approx(1.0) and all(s > 0 for s in speed.values())
    assert speed["oracle"] >= max(speed["fixed16"], speed["fixed4"], speed["fixed1"]) - 1e-9
    refused = run("compare", "--policies", "adaptive", "--sweep", tmp_path / "live", ok=False)
    assert "replay" in refused.output and "Traceback" not in refused.output


@pytest.mark.slow  # sweeps with the test pair
def test_a_store_with_a_damaged_cost_table_or_meta_is_named_and_repaired_by_resuming(
        test_zoo, prompt_file, tmp_path):
    """Reported: a broken latency.json or meta.json could not be repaired through the CLI, and compare's error
    for meta.json named no file."""
    args = ["sweep", "--dataset", prompt_file, "--candidates", "1,4", "--max-samples", "2",
            "--max-new-tokens", "8",
            "--out", tmp_path / "s", *zoo_args(test_zoo)]
    run(*args)
    (tmp_path / "s" / "latency.json").write_text("{not json")
    broken = run("compare", "--policies", "fixed4", "--sweep", tmp_path / "s", ok=False).output
    assert "latency.json" in broken and "resume the sweep" in broken and "bug" not in broken
    run(*args)  # the same command measures the table again
    run("compare", "--policies", "fixed4", "--sweep", tmp_path / "s")
    (tmp_path / "s" / "meta.json").write_text("{not json")
    broken = run("compare", "--policies", "fixed4", "--sweep", tmp_path / "s", ok=False).output
    assert "meta.json" in broken and "bug" not in broken


@pytest.mark.slow  # sweeps with the test pair
def test_a_stuck_compare_cache_is_named_with_a_fix_compare_has(test_zoo, prompt_file, tmp_path, monkeypatch):
    """Reported: inside compare's cache the hint named --out, which compare lacks."""
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    args = ["compare", "--policies", "fixed16", "--dataset", prompt_file, "--max-samples", "2",
            "--candidates",
            "1,16", "--max-new-tokens", "8", *zoo_args(test_zoo)]
    run(*args)
    store = next((tmp_path / "cache" / "sweeps").iterdir())
    (store / "meta.json").write_text("{not json")
    output = " ".join(run(*args, ok=False).output.split())
    assert "compare's cache" in output and f"delete {store}" in output


@pytest.mark.parametrize(("text", "names"), [
    ("fixed16,blockpilot,oracle", ["fixed16", "blockpilot", "oracle"]),
    (" fixed16 , ,oracle", ["fixed16", "oracle"]),
    ("trtllm-schedule:acceptance_rate_window_size=8,acceptance_rate_threshold=3,fixed16",
     ["trtllm-schedule:acceptance_rate_window_size=8,acceptance_rate_threshold=3", "fixed16"]),
    ("llamacpp-pmin:p_min=0.5,n_max=7,vllm-adaptive", ["llamacpp-pmin:p_min=0.5,n_max=7", "vllm-adaptive"]),
    ("blockpilot:/runs/a=b,fixed16", ["blockpilot:/runs/a=b", "fixed16"]),
])
def test_policy_lists_keep_engine_arguments_together(text, names):
    """Reproduced first: --policies split trtllm-schedule's second argument off as an unknown policy."""
    from specpolicy.cli.common import policy_names

    assert policy_names(text) == names


def test_a_compare_table_by_label_fits_a_100_column_terminal(monkeypatch):
    """Reported: tutorial 1's `--by group` table was 109 columns and wrapped numbers mid-value at 100."""
    import io

    from rich.console import Console

    from specpolicy.cli import common
    from specpolicy.zoo import ZOO_DIR

    screen = io.StringIO()
    monkeypatch.setattr(common, "stdout",
                        Console(file=screen, width=100, force_terminal=True, color_system=None))
    run("compare", "--sweep", ZOO_DIR / "sweeps" / "spec-bench", "--by", "group",
        "--policies", "fixed16,blockpilot-guard,oracle-step")
    lines = screen.getvalue().splitlines()
    rows = [line for line in lines if line.startswith("│")]
    # one line per row, whole values
    assert len(rows) == 7 * 3 and all("x" in line.split("│")[3] for line in rows)
    assert max(len(line) for line in lines) <= 100


def test_a_policy_named_twice_is_refused_before_any_work():
    result = runner.invoke(app, ["compare", "--sweep", "specpolicy/zoo/tiny/sweeps/sharegpt", "--policies",
                                 "fixed16,blockpilot,fixed16"])
    assert result.exit_code == 2 and "--policies names fixed16 twice" in result.output


def test_a_backwards_candidate_range_says_so():
    result = runner.invoke(app,
                           ["compare", "--sweep", "specpolicy/zoo/tiny/sweeps/sharegpt", "--candidates",
                            "18-14"])
    assert result.exit_code == 2 and "18-14 runs backwards" in " ".join(result.output.split())


def test_tables_in_a_pipe_fit_the_columns_the_environment_names():
    result = runner.invoke(app, ["policies"], env={"COLUMNS": "100"})
    assert result.exit_code == 0 and max(map(len, result.stdout.splitlines())) <= 100


def test_tables_in_a_pipe_fit_100_columns_where_the_environment_names_none(monkeypatch):
    """Seen: `specpolicy policies | less` drew a table 199 columns wide (a pipe got 200 columns)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    result = runner.invoke(app, ["policies"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and max(map(len, lines)) <= 100
    for name in ("blockpilot-guard", "mistralrs-adaptive"):  # names whole, descriptions fold
        assert any(line.startswith(f"│ {name} ") for line in lines)


def test_zoo_info_says_where_the_zoo_is_and_sums_each_folder():
    """Reported: 1,209 lines, one per file, and no word of where the zoo is."""
    from specpolicy.zoo import ZOO_DIR

    result = runner.invoke(app, ["zoo", "info"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and str(ZOO_DIR) in lines[0] and len(lines) < 40
    assert any(line.startswith("sweeps/") and "files" in line for line in lines)


def test_a_noisy_first_run_says_so_and_never_caches_the_flagged_table(test_zoo, prompt_file, tmp_path,
                                                                      monkeypatch):
    """Issue 48: on a busy machine the main job measured a flagged table, cached it with the sweep for good
    and reported the headline with it, without a word. Now the sweep measures again once, and compare says the
    machine was too noisy, drops the table from its cache and labels what it priced with."""
    from dataclasses import replace

    from specpolicy.sweep import run as sweep_run

    measured = []

    def noisy(decoder, sizes, *args, **kwargs):
        measured.append(sizes)
        table = sweep_run.__dict__["_real_measure"](decoder, sizes, repeats=4)
        return replace(table, spread={16: 0.9}, warnings=("noisy: 1 block sizes vary by more than 15%",))

    monkeypatch.setattr(sweep_run, "_real_measure", sweep_run.measure_costs, raising=False)
    monkeypatch.setattr(sweep_run, "measure_costs", noisy)
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    args = ["compare", "--policies", "fixed16,oracle", "--dataset", prompt_file, "--max-samples", "2",
            "--max-new-tokens", "8", "--format", "json", *zoo_args(test_zoo)]
    with pytest.warns(UserWarning, match="measured flagged twice"):  # the sweep says so
        result = run(*args)
    assert len(measured) == 2  # measured again once before giving up
    text = " ".join(result.stderr.split())
    assert "too noisy to measure its cost table" in text
    assert "specpolicy bench latency --out costs.json" in text
    assert {r["timing"] for r in json.loads(result.stdout)} == {"modelled (flagged table)"}
    assert not list((tmp_path / "cache" / "sweeps").glob("*/latency.json"))  # never cached
    run(*args)
    assert len(measured) == 4  # the rerun measures again


def test_the_shipped_pair_falls_back_to_its_quiet_table(tmp_path):
    from types import SimpleNamespace

    from specpolicy.cli.compare_runs import headline_costs
    from specpolicy.costs import uniform_costs
    from specpolicy.evaluation.compare import CompareOptions

    noisy = replace_spread(uniform_costs([1, 4, 16], 0.01, per_token=0.1))
    noisy.save(tmp_path / "latency.json")
    store = SimpleNamespace(path=tmp_path, latency=lambda: noisy)
    table, label = headline_costs(store, CompareOptions(["fixed16"]))
    assert label == "shipped table" and table.machine == "AMD EPYC (2 cores)" and not table.check()
    assert not (tmp_path / "latency.json").exists()


def replace_spread(table):
    from dataclasses import replace

    return replace(table, spread={16: 0.9})


def test_generate_writes_its_text_unwrapped_to_a_pipe(test_zoo, monkeypatch):
    """Issue 48: written to a file or pipe, the text was hard-wrapped at 80 columns (newlines mid-word)."""
    from transformers import PreTrainedTokenizerBase

    text = " ".join(f"word{i}" for i in range(60))  # 400 characters, one line
    monkeypatch.setattr(PreTrainedTokenizerBase, "decode", lambda self, ids, **kwargs: text)
    result = run("generate", "Say hello", "--max-new-tokens", "6", "--block-size", "4", *zoo_args(test_zoo))
    assert result.stdout.splitlines()[0] == text


@pytest.mark.parametrize("temperature", ["1e308", "1e30"])
def test_an_absurd_temperature_is_refused(temperature):
    """Issue 48: --temperature 1e308 ran (every token uniform, in effect)."""
    result = run("compare", "--temperature", temperature, "--max-samples", "1", ok=False)
    assert result.exit_code == 2 and "--temperature must be a finite number in [0, 100]" in result.output


def test_a_complete_cached_sweep_is_read_without_models_or_a_write_lock(
        test_zoo, prompt_file, tmp_path, monkeypatch, quiet_machine):
    """Issue 48: a rerun with the sweep cached loaded the models (20-45 s), and a read-only cache that already
    held the finished store failed on the write lock."""
    import os
    import stat

    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    args = ["compare", "--policies", "fixed16,oracle", "--dataset", prompt_file, "--max-samples", "2",
            "--max-new-tokens", "8", "--format", "json", *zoo_args(test_zoo)]
    first = json.loads(run(*args).stdout)  # a clean table (a busy machine's would not be cached)
    from specpolicy.models import loading

    monkeypatch.setattr(loading, "load_pair",
                        lambda *a, **k: pytest.fail("models loaded for a complete cache"))
    for folder, _, files in os.walk(tmp_path / "cache"):  # read-only, as a shared cache may be
        for name in files:
            os.chmod(os.path.join(folder, name), stat.S_IRUSR)
    second = run(*args)
    assert json.loads(second.stdout) == first and "into compare's cache" not in second.stderr


def test_a_fresh_compare_decodes_the_block_sizes_its_policies_choose(test_zoo, prompt_file, tmp_path,
                                                                     monkeypatch,
                                                                      quiet_machine):
    """Issue 48: live compare refused a saved agent (or any policy) choosing a size outside the default
    candidates unless --candidates matched, with a message about a sweep it had not been given; a fresh sweep
    did the same."""
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    for mode in ("live", "replay"):
        result = run("compare", "--policies", "fixed16,fixed14", "--mode", mode, "--dataset", prompt_file,
                     "--max-samples", "1", "--max-new-tokens", "6", "--format", "json", *zoo_args(test_zoo))
        assert {r["policy"] for r in json.loads(result.stdout)} == {"fixed16", "fixed14"}
    refused = run("compare", "--policies", "fixed16,fixed14", "--candidates", "1,4,16", "--dataset",
                  prompt_file,
                  "--max-samples", "1", *zoo_args(test_zoo), ok=False)
    text = " ".join(refused.output.split())
    assert refused.exit_code == 2
    assert "but --candidates gives [1, 4, 16] (missing [14]); add them to --candidates" in text


def test_bench_latency_checks_its_decodes_at_a_block_size_it_measured(test_zoo, tmp_path):
    """Reproduced first: with --candidates 1,4 it measured, printed the table, then failed its decode check at
    B = 16 (the training size, unmeasured) and saved nothing."""
    out = tmp_path / "costs.json"
    result = run("bench", "latency", "--candidates", "1,4", "--repeats", "4", "--check-prompts", "1",
                 "--out", out, *zoo_args(test_zoo))
    assert "fixed B = 4: measured" in result.output and out.exists()


def test_the_command_list_reads_each_summary_as_one_sentence():
    """Reported: typer 0.29 keeps a docstring's source line breaks in `specpolicy --help`'s command list, so
    "export ... that run it" and "as closely as each engine can" stood on two rows even with room for one."""
    wide = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "250"})
    assert wide.exit_code == 0
    row = next(line for line in wide.output.splitlines() if "│ export " in line)
    assert "that run it as closely as each engine can" in row
    assert "`" not in wide.output  # code spans are styled, not shown as backticks


def test_a_replay_tables_title_names_the_cost_table_that_priced_it(replay_store):
    """The same decodes priced by two tables read alike (the twin's and the tiny pair's): the title says which
    priced them."""
    from tests.fixtures.prebuilt import HERE

    own = run("compare", "--policies", "fixed16,oracle", "--sweep", replay_store.path)
    table = HERE / "costs-quiet-2core.json"
    other = run("compare", "--policies", "fixed16,oracle", "--sweep", replay_store.path, "--costs", table,
                "--candidates", "1,2,4,8,16")
    assert "modelled (the sweep's own table) time" in " ".join(own.stdout.split("┏")[0].split())
    assert "modelled (costs-quiet-2core) time" in " ".join(other.stdout.split("┏")[0].split())
