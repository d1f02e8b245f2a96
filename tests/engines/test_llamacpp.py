"""The llama.cpp backend's process handling and policy mapping, run against a stand-in server (fast tier):
finding the binary, a server per setting, every server stopped on every way out, refusals before any server
starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from specpolicy.cycles import Plan
from specpolicy.engines.build import SERVER_ENV, _pre_tokenizer, find_server
from specpolicy.engines.llamacpp import Reply, Server, ServerPool, Setting, Step
from specpolicy.evaluation.engine import PLAIN, EngineRun, evaluate_engine, plan_settings
from specpolicy.evaluation.engine_compare import engine_costs
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR

FAKE = Path(__file__).with_name("fake_server.py")
SHIPPED = ZOO_DIR / "sweeps" / "sharegpt"


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_binary(tmp_path) -> Path:
    return _script(tmp_path / "llama-server", f'exec {sys.executable} {FAKE} "$@"')


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as stat:  # a zombie awaiting its parent's wait counts as gone
            if stat.read().split()[2] == "Z":
                return True
        time.sleep(0.05)
    return False


def test_the_binary_is_found_by_flag_variable_path_or_cache_and_missing_says_how_to_build_it(
        tmp_path, monkeypatch, fake_binary):
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(SERVER_ENV, raising=False)
    with pytest.raises(ValueError, match=r"llama-server not found .* `specpolicy engine build`"):
        find_server()
    assert find_server(str(fake_binary)) == fake_binary
    monkeypatch.setenv(SERVER_ENV, str(fake_binary))
    assert find_server() == fake_binary
    with pytest.raises(ValueError, match=r"--server .*nope is not an executable llama-server"):
        find_server(tmp_path / "nope")
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "nope"))
    with pytest.raises(ValueError, match=r"\$SPECPOLICY_LLAMA_SERVER .*nope is not an executable"):
        find_server()


def test_a_server_in_the_current_folder_is_found_as_a_shell_finds_it_and_kept_absolute(
        tmp_path, monkeypatch, fake_binary):
    """``--server ./llama-server``, ``--server llama-server`` and the variable set to a bare name (issue 54:
    "no such file or folder" though the file existed); export writes the absolute path."""
    monkeypatch.chdir(fake_binary.parent)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for given in (f"./{fake_binary.name}", fake_binary.name):
        assert find_server(given) == fake_binary.absolute()
        monkeypatch.setenv(SERVER_ENV, given)
        assert find_server() == fake_binary.absolute()
    binary = find_server(f"./{fake_binary.name}")
    server = Server.start(binary, tmp_path / "t.gguf", tmp_path / "d.gguf", Setting(16), 1)
    try:
        assert server.complete([5, 6], 4).tokens and Path(server.command[0]).is_absolute()
    finally:
        server.stop()


def test_a_pool_starts_one_server_per_setting_with_pinned_threads_and_stops_them_all(fake_binary, tmp_path):
    with ServerPool(fake_binary, tmp_path / "target.gguf", tmp_path / "drafter.gguf", threads=1) as pool:
        reply = pool[Setting(16)].complete([5, 6], 4)
        assert (reply.tokens, reply.drafted, reply.accepted, reply.cycles, reply.tau) == \
            ((7, 8, 9, 10), 30, 2, 1, 3.0)
        assert pool[Setting(1)].complete([5], 3).tokens == (6, 7, 8)
        assert pool[Setting(16)] is pool[Setting(16)]
        command = " ".join(pool[Setting(16)].command)
        for flag in ("-t 1 -tb 1", "-td 1 -tbd 1", "--spec-type draft-dflash --spec-draft-n-max 15",
                     "-ctk f32",
                     "--host 127.0.0.1", "-md "):
            assert flag in command
        assert "-md" not in pool[Setting(1)].command and "none" in pool[Setting(1)].command
        processes = [server.process for server in pool.servers.values()]
    assert all(process.poll() is not None for process in processes)


def test_a_patched_binary_is_known_by_itself_not_by_the_file_beside_it(tmp_path):
    """Issue 75: a patched llama-server copied without its llama-server.json was taken for a stock one (so
    `compare --engine` refused per-step plans and `export --engine` wrote one server per setting); the binary
    is asked instead: it holds the plan fields only the patch reads. A stale sidecar still says no."""
    from specpolicy.engines.build import patch_digest, patched

    copy = tmp_path / "copy" / "llama-server"
    copy.parent.mkdir()
    copy.write_bytes(b"\x7fELF..." + b"length_seconds\0spec_steps\0" + b"...")
    assert patched(copy)
    stock = tmp_path / "stock"
    stock.write_bytes(b"\x7fELF...spec_steps... a stock build's strings")
    assert not patched(stock)
    (tmp_path / "copy" / "llama-server.json").write_text(json.dumps({"patch": "an older patch"}))
    assert not patched(copy)
    (tmp_path / "copy" / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    assert patched(copy)


def test_a_patched_server_takes_every_setting_per_request_on_one_server(fake_binary, tmp_path, monkeypatch):
    """A binary built with the patch set (its llama-server.json names the patch): one DFlash server, each
    request carrying its own n_max and p_min, and the steps it records in the reply; plain decoding keeps its
    own server."""
    from specpolicy.engines.build import patch_digest, patched

    assert not patched(fake_binary)
    (tmp_path / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    monkeypatch.setenv("FAKE_PATCHED", "1")
    assert patched(fake_binary)
    with ServerPool(fake_binary, tmp_path / "target.gguf", tmp_path / "drafter.gguf", threads=1) as pool:
        four, sixteen = pool[Setting(4)].complete([5, 6], 4), pool[Setting(16, 0.5)].complete([5, 6], 4)
        assert (four.drafted, sixteen.drafted) == (6, 30)  # the request's block, not the server's
        assert four.steps[0].drafted == 3 and four.steps[0].probabilities == (0.5, 0.5, 0.5)
        assert pool[Setting(1)].complete([5], 3).tokens == (6, 7, 8)
        assert len(pool.servers) == 2 and "--spec-draft-n-max 63" in " ".join(pool[Setting(8)].server.command)


def test_ctrl_c_inside_the_pool_stops_every_server(fake_binary, tmp_path):
    with pytest.raises(KeyboardInterrupt), ServerPool(fake_binary, tmp_path / "t", tmp_path / "d", 1) as pool:
        processes = [pool[Setting(b)].process for b in (1, 4)]
        raise KeyboardInterrupt
    assert all(process.poll() is not None for process in processes)


def test_servers_die_with_the_process_that_started_them_even_under_kill_9(fake_binary, tmp_path):
    program = (f"import sys, time\nfrom pathlib import Path\nfrom specpolicy.engines.llamacpp import "
               f"ServerPool, "
               f"Setting\npool = ServerPool(Path({str(fake_binary)!r}), Path('t'), Path('d'), 1)\n"
               f"print(pool[Setting(8)].process.pid, flush=True)\ntime.sleep(60)\n")
    temp = tmp_path / "temp"
    temp.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(temp)})
    server_pid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _gone(server_pid)
    assert list(temp.iterdir()) == []  # nor its log: a killed run leaves no file behind


def test_a_server_that_fails_to_start_is_reported_with_its_own_words(tmp_path):
    binary = _script(tmp_path / "llama-server", "echo 'error: failed to load model t.gguf'; exit 1")
    with pytest.raises(ValueError, match=r"exited with code 1 while starting(.|\n)*failed to load model"):
        Server.start(binary, tmp_path / "t.gguf", tmp_path / "d.gguf", Setting(16), 1)


def test_settings_name_their_flags():
    assert Setting(1).flags() == ["--spec-type", "none"] and Setting(1).name == "none"
    assert Setting(16, 0.5).name == "n_max=15,p_min=0.5"
    assert Setting(4).flags()[-3:] == ["--spec-draft-p-min", "0", "--no-spec-draft-backend-sampling"]


@pytest.mark.parametrize(("name", "setting"), [
    ("fixed16", Setting(16)), ("fixed1", Setting(1)), ("llamacpp-pmin", Setting(4)),
    ("llamacpp-pmin:n_max=7,p_min=0.5", Setting(8, 0.5)),
])
def test_per_prompt_policies_and_llama_cpps_rule_map_to_a_server_setting(name, setting):
    store = SweepStore.load(SHIPPED)
    records = list(store.records())[:2]
    candidates = [1, 2, 4, 8, 12, 16]
    assert plan_settings(store, records, [create_policy(name, candidates)],
                         store.latency()) == [[setting]] * 2


def test_the_oracle_and_blockpilot_map_to_a_block_size_per_prompt():
    store = SweepStore.load(SHIPPED)
    records = list(store.records())[:6]
    policies = [create_policy(name, [1, 2, 4, 8, 12, 16]) for name in ("oracle", "blockpilot")]
    for chosen in plan_settings(store, records, policies, store.latency()):
        assert all(s.p_min == 0 and s.block_size in (1, 2, 4, 8, 12, 16) for s in chosen)


@pytest.mark.parametrize(("name", "message"), [
    ("adaptive", "decides per cycle or sets verify lengths.*llamacpp-pmin"),
    ("marginal16", "decides per cycle or sets verify lengths"),
    ("fixed20", "past the drafter's trained block 16.*--candidates up to 16"),
])
def test_policies_the_engine_cannot_run_are_refused_before_any_server(name, message):
    store = SweepStore.load(SHIPPED)
    with pytest.raises(ValueError, match=message):
        plan_settings(store, list(store.records())[:1], [create_policy(name, [1, 4, 8, 16, 20])],
                      store.latency())


def test_the_engine_run_rotates_settings_and_prices_its_own_cost_table(fake_binary, tmp_path):
    store = SweepStore.load(SHIPPED)
    records = list(store.records())[:3]
    policies = [create_policy(name, [1, 4, 8, 16]) for name in ("fixed16", "fixed4", "fixed1")]
    with ServerPool(fake_binary, tmp_path / "t", tmp_path / "d", 1) as pool:
        run = evaluate_engine(pool, store, policies, records=records)
    assert [len(r.prompts) for r in run.results] == [3, 3, 3]
    assert set(run.replies) == {(r.prompt_id, s) for r in records for s in (PLAIN, Setting(4), Setting(16))}
    assert run.lossless_failures() == []  # the stand-in answers every setting alike
    assert run.first_difference(records[0].prompt_id) is not None  # ... and not as the tiny target does
    costs = engine_costs(run, threads=1)
    assert costs.block_sizes == (1, 4, 16) and costs.ar_seconds == pytest.approx(0.002 * 128 / 127)
    assert costs.cycle_seconds(16) > costs.cycle_seconds(4) > 0


def test_engine_costs_divide_the_servers_time_by_its_target_passes():
    run = EngineRun([], {("a", PLAIN): Reply((1, 2, 3, 4), 0, 0, 0.4),
                         ("a", Setting(8)): Reply((1, 2, 3, 4), 14, 2, 0.3),
                         ("a", Setting(8, 0.5)): Reply((1, 2, 3, 4), 3, 3, 0.1)})
    costs = engine_costs(run, threads=2)
    assert costs.verify_seconds == {1: pytest.approx(0.4 / 3), 8: pytest.approx(0.3)} and costs.threads == 2
    assert costs.draft_seconds == {1: 0.0, 8: 0.0}  # a server that timed no step: draft and verify together


def test_a_patched_servers_step_timings_price_the_drafter_apart():
    """Issue 55: the engine's table priced a cycle that verifies fewer than it drafted as a cycle of its
    verify length, drafter and all; the patched server times each step's drafter pass, so the table holds it
    apart."""
    step = Step(8, 7, 7, 2, (0.5,) * 7, draft_seconds=0.004, seconds=0.010)
    run = EngineRun([], {("a", PLAIN): Reply((1, 2, 3, 4), 0, 0, 0.3),
                         ("a", Setting(8)): Reply((1, 2, 3, 4, 5, 6, 7), 14, 4, 0.02, (step, step))})
    costs = engine_costs(run, threads=1)
    assert costs.draft_seconds[8] == pytest.approx(0.004) and costs.verify_seconds[8] == pytest.approx(0.006)
    assert costs.cycle_seconds(8) == pytest.approx(0.01)  # the whole cycle as the server measured it
    # the drafter paid whole
    assert costs.split_cycle_seconds(8, 4) == pytest.approx(0.004 + costs.verify_cost(4))


def test_only_gpt2s_own_byte_level_split_is_declared_gpt2(tmp_path):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    for pre, expected in ((byte_level, "gpt-2"), ({**byte_level, "use_regex": False}, ""),
                          ({"type": "Metaspace"}, "")):
        (tmp_path / "tokenizer.json").write_text(__import__("json").dumps({"pre_tokenizer": pre}))
        assert _pre_tokenizer(tmp_path) == expected
    assert _pre_tokenizer(ZOO_DIR / "target") == "gpt-2"


def test_a_reply_counts_cycles_after_the_prefills_token():
    assert (Reply((5, 6, 7, 8), 6, 2, 0.1).cycles, Reply((5, 6, 7, 8), 6, 2, 0.1).tau) == (1, 3.0)
    # a stop token first: no cycle
    assert (Reply((), 0, 0, 0.0).tau, Reply((7,), 0, 0, 0.0).cycles) == (0.0, 0)


def test_a_conversion_is_identified_by_its_inputs_and_a_stale_or_damaged_one_is_redone(
        test_zoo, tmp_path, monkeypatch):
    """``engine convert --out DIR`` holding another pair's conversion, or a deleted or truncated GGUF file, is
    converted again (issue 54: it returned the old files)."""
    from specpolicy.engines import build

    runs = []

    def converter(command, log, cwd=None):
        runs.append(command[5])  # the model folder converted
        log.write_text("")
        Path(command[command.index("--outfile") + 1]).write_bytes(b"GGUF" + command[5].encode())

    monkeypatch.setattr(build, "llama_source", lambda report: tmp_path)
    monkeypatch.setattr(build, "_run", converter)
    out = tmp_path / "out"
    build.gguf_pair("tiny", "tiny", out, report=lambda line: None)
    build.gguf_pair("tiny", "tiny", out, report=lambda line: None)
    assert len(runs) == 2  # target and drafter once: the second call found them complete
    target, drafter = (str(p) for p in test_zoo)
    build.gguf_pair(target, drafter, out, report=lambda line: None)
    assert runs[2:] == [target, drafter] and (out / "target.gguf").read_bytes().endswith(target.encode())
    (out / "drafter.gguf").write_bytes(b"GG")  # truncated
    build.gguf_pair(target, drafter, out, report=lambda line: None)
    (out / "target.gguf").unlink()
    build.gguf_pair(target, drafter, out, report=lambda line: None)
    assert len(runs) == 8


def test_engine_convert_refuses_a_swapped_pair_or_a_target_without_its_tokenizer_before_converting(
        test_zoo, tmp_path, monkeypatch):
    """Reproduced (issue 75, #8): a swapped pair, or a target folder without a tokenizer, printed the
    converter's embedded script and llama.cpp's 39-line traceback."""
    from specpolicy.engines import build

    monkeypatch.setattr(build, "_run", lambda *args, **kwargs: pytest.fail("the converter ran"))
    target, drafter = test_zoo
    bare = tmp_path / "bare"
    shutil.copytree(target, bare, ignore=shutil.ignore_patterns("tokenizer*"))
    for pair, said in (((drafter, target), f"--target {drafter} is a DFlash drafter"),
                       ((target, target), f"--drafter {target} is not a DFlash drafter"),
                       ((bare, drafter), f"--target {bare} has no tokenizer")):
        with pytest.raises(ValueError, match=re.escape(said)):
            build.gguf_pair(str(pair[0]), str(pair[1]), tmp_path / "out", report=lambda line: None)


def test_engine_convert_names_an_out_that_is_a_file_before_converting(tmp_path):
    """Reproduced: `engine convert --out FILE` said "File exists: FILE; check the path, its space and limits"
    (the write's OSError), and --out FILE/sub the same of its parent."""
    from typer.testing import CliRunner

    from specpolicy.cli import app

    (tmp_path / "file").write_text("")
    for out, said in ((tmp_path / "file", "is a file"), (tmp_path / "file" / "sub", "lies under the file")):
        result = CliRunner().invoke(app, ["engine", "convert", "--out", str(out)])
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: --out {out} {said}") and "pass a folder" in result.stderr


def test_a_cost_aware_rule_is_a_value_a_patched_server_runs_and_a_stock_one_refuses(replay_store):
    """adaptive's plan (and the default's guard) carries its choices, cost table and parameters as a value;
    the patched engine gets it as the request's plan, a stock one refuses the policy naming why."""
    from specpolicy.evaluation.engine import engine_setting
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy
    from specpolicy.replay.lanes import CostAwareBlocks
    from specpolicy.state import DecodeState

    record = next(replay_store.records())
    costs = replay_store.latency()
    policy = create_policy("adaptive", [1, 2, 4, 8])
    plan = policy.checked_plan(prompt_observation(replay_store, record, costs))
    rule = plan.block
    assert isinstance(rule, CostAwareBlocks) and rule.blocks == (2, 4, 8) and rule.ar_allowed
    request = rule.request()
    assert request["start"] == 8 and request["ar_seconds"] == costs.cycle_seconds(1)
    from specpolicy.plugins.cycle_rules import PROBE_OPTIMISM

    assert request["optimism"] == PROBE_OPTIMISM  # the patched server gates its probes as replay does
    assert dict(zip(request["priced"], request["seconds"])) == {b: costs.cycle_seconds(b) for b in (2, 4, 8)}
    assert rule(DecodeState.after_prefill(np.zeros(0, np.float32), record.prompt_length)) == 8
    setting = engine_setting(policy, plan, 16, per_request=True)
    assert json.loads(setting.plan) == request and setting.block_size == 16
    with pytest.raises(ValueError, match="decides per cycle"):
        engine_setting(policy, plan, 16)


def test_the_best_stock_setting_is_the_fastest_of_the_stock_flags_by_replay(verify_store):
    """Issue 55: for an unpatched llama.cpp, the fastest --spec-draft-n-max / --spec-draft-p-min for the pair,
    by replay priced with the engine's own table; p_min above 0 only where the sweep recorded confidences."""
    from specpolicy.costs import CostTable
    from specpolicy.evaluation.engine_compare import best_stock_setting
    from specpolicy.evaluation.replay import evaluate_replay

    store = SweepStore.load(verify_store.path)
    costs = CostTable.load("tests/fixtures/costs-llamacpp-engine-cpu.json")
    best = best_stock_setting(store, costs, [1, 2, 4, 8])
    grid = [f"llamacpp-pmin:n_max={n},p_min={p}" for n in (1, 3, 7) for p in (0.0, 0.5, 0.75, 0.9)]
    results = evaluate_replay(store, [create_policy(name, [1, 2, 4, 8]) for name in grid], costs=costs,
                              candidates=[1, 2, 4, 8])
    speeds = {r.policy: r.column("ar_seconds").sum() / r.column("seconds").sum() for r in results}
    assert best.policy in speeds and best.speed == pytest.approx(max(speeds.values()))


def test_compare_engine_is_a_library_call_staging_calibration_run_and_replay(
        fake_binary, replay_store, tmp_path, monkeypatch):
    """Issue 55: the engine's orchestration is callable from Python (the CLI only prints it): the pair
    converted once, the engine's table calibrated, every prompt run in one pool, replay priced with that table
    beside it."""
    import contextlib

    from specpolicy.evaluation.engine_compare import compare_engine

    converted = []
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print:
                        converted.append((target, drafter)) or tmp_path)
    stages = []

    @contextlib.contextmanager
    def progress(description, total):
        stages.append([description, total, 0])
        yield lambda done, total: stages[-1].__setitem__(2, done)

    policies = [create_policy(name, [1, 2, 4, 8]) for name in ("fixed8", "fixed2", "oracle")]
    comparison = compare_engine(replay_store, policies, server=fake_binary, progress=progress,
                                       report=lambda line: None)
    prompts = len(list(replay_store.records()))
    assert converted == [("tiny", "tiny")]
    assert stages == [["engine costs", 8, min(8, prompts)],
                      [f"llama.cpp {replay_store.path.name}", prompts, prompts]]
    assert [r.policy for r in comparison.run.results] == [r.policy for r in comparison.modelled] == \
        ["fixed8", "fixed2", "oracle"]
    assert all(len(r.prompts) == prompts for r in comparison.run.results + comparison.modelled)
    assert comparison.costs.block_sizes == (1, 2, 4, 8) and comparison.modelled[0].timing == "modelled"
    assert comparison.stock is not None and comparison.stock.n_max in (1, 3, 7)


def test_a_prompt_decoded_plainly_goes_to_plain_decodings_server_on_a_patched_pool(replay_store):
    """One DFlash server serves every speculative plan; a prompt a policy decodes plainly is plain decoding's
    (its own server, no drafter run), as replay prices it (CostTable.fixed_cycle_seconds)."""
    records = list(replay_store.records())[:2]
    policies = [create_policy(name, [1, 2, 4, 8]) for name in ("fixed1", "fixed4")]
    settings = plan_settings(replay_store, records, policies, replay_store.latency(), per_request=True)
    assert settings == [[PLAIN, Setting(4)]] * 2


def test_the_engines_replies_saved_by_a_compare_import_as_rounds_with_its_confidences(
        fake_binary, replay_store, tmp_path, monkeypatch):
    """Issue 55: the engine's records are traces: `compare --engine --steps DIR` writes each policy's replies
    as llama-server answers them, and a fixed setting's import as rounds at its block with the engine's
    probabilities; a per-step plan's, or a run with cut verifies, is refused."""
    from specpolicy.engines.build import patch_digest
    from specpolicy.evaluation.engine_compare import compare_engine
    from specpolicy.sweep.traces import import_traces

    (tmp_path / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    monkeypatch.setenv("FAKE_PATCHED", "1")
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print: tmp_path)
    policies = [create_policy(name, [1, 2, 4, 8]) for name in ("fixed4", "adaptive")]
    comparison = compare_engine(replay_store, policies, server=fake_binary, report=lambda line: None)
    fixed, per_step = comparison.run.save_steps(tmp_path / "steps")
    assert (fixed.name, per_step.name) == ("fixed4.jsonl", "adaptive.jsonl")
    result = import_traces(fixed, tmp_path / "store")
    store, replies = result.store, {pid: comparison.run.replies[pid, s[0]] for pid,
                                    s in comparison.run.chosen.items()}
    assert store.candidates == (4,
                                ) and store.meta["confidence_sizes"] == [4] and "per step" in result.exact_for
    for record in store.records():
        reply, table = replies[record.prompt_id.removeprefix("fixed4:")], record.table()
        assert table.rounds and [c.accepted for c in table.simulate(Plan.fixed(4))] == \
            [s.accepted for s in reply.steps]
        assert table.drafted_block(0, 4).confidences == (0.5, 0.5, 0.5)
    cut = tmp_path / "cut.jsonl"  # a p_min run's verify cut after two drafts
    cut.write_text(json.dumps({"id": "x", "timings": {"spec_steps": [
        {"block": 8, "drafted": 7, "verified": 2, "accepted": 1, "p": [0.9, 0.6, 0.1, 0, 0, 0, 0]}]}}) + "\n")
    with pytest.raises(ValueError, match="cut its verifies"):
        import_traces(cut, tmp_path / "cut")
    mixed = tmp_path / "mixed.jsonl"  # a per-step plan's steps: blocks of 1 and 8
    mixed.write_text(json.dumps({"id": "y", "timings": {"spec_steps": [
        {"block": 1, "drafted": 0, "verified": 0, "accepted": 0, "p": []},
        {"block": 8, "drafted": 7, "verified": 7, "accepted": 7, "p": [0.9] * 7}]}}) + "\n")
    with pytest.raises(ValueError, match=r"a block of 1 where the run's is 8 with room for more"):
        import_traces(mixed, tmp_path / "mixed")
    stock = tmp_path / "stock.jsonl"
    stock.write_text(json.dumps({"id": "a", "tokens": [1, 2], "timings": {"draft_n": 3}}) + "\n")
    with pytest.raises(ValueError, match="no timings.spec_steps"):
        import_traces(stock, tmp_path / "stock")


def test_a_fixed_runs_steps_import_where_a_stop_token_ends_the_output_short_of_the_budget(tmp_path):
    """Reproduced first on the shipped ShareGPT sweep's fixed16 steps: the engine caps a block at the
    request's budget (n_predict), not at the tokens the output ends with, so an output a stop token ended two
    tokens short of its budget read as a per-step plan's steps and the import was refused."""
    from specpolicy.sweep.traces import import_traces

    def step(block: int, accepted: int) -> dict:
        return {"block": block, "drafted": block - 1, "verified": block - 1, "accepted": accepted,
                "p": [0.5] * (block - 1)}

    # block 4, budget 8: produced 1 -> 2 -> 3 -> 5, then a block of 3 (the budget's room), and a stop at 6
    steps = tmp_path / "fixed4.jsonl"
    steps.write_text(json.dumps({"id": "s", "tokens": list(range(6)), "timings": {"spec_steps": [
        step(4, 0), step(4, 0), step(4, 1), step(3, 0)]}}) + "\n")
    store = import_traces(steps, tmp_path / "store").store
    assert store.candidates == (4,) and len(list(store.records())) == 1
    # a block below the run's that no budget explains (the output goes on past it) is still a per-step plan's
    steps.write_text(json.dumps({"id": "s", "tokens": list(range(9)), "timings": {"spec_steps": [
        step(4, 0), step(2, 1), step(4, 3)]}}) + "\n")
    with pytest.raises(ValueError, match="a block of 2 where the run's is 4 with room for more"):
        import_traces(steps, tmp_path / "plan")


def test_a_run_whose_budget_capped_every_block_names_the_block_it_cannot_read(tmp_path):
    """Issue 75 #6: a fixed16 run with a 12-token budget imported as "B = 11" (its first, capped block),
    without a word that llama.cpp capped every draft at the budget; the run's block is not in the record, so
    the import asks for it, and takes it where every step agrees with it."""
    from specpolicy.sweep.traces import TraceArgs, import_traces

    def step(block: int, accepted: int) -> dict:
        return {"block": block, "drafted": block - 1, "verified": block - 1, "accepted": accepted,
                "p": [0.5] * (block - 1)}

    steps = tmp_path / "fixed16.jsonl"  # budget 12: blocks of 11, then of the room left
    steps.write_text(json.dumps({"id": "s", "tokens": list(range(12)), "timings": {"spec_steps": [
        step(11, 2), step(8, 7)]}}) + "\n")
    with pytest.raises(ValueError, match=r"capped every block at its budget.*--candidates B"):
        import_traces(steps, tmp_path / "unknown")
    store = import_traces(steps, tmp_path / "store", TraceArgs(candidates=[16])).store
    assert store.candidates == (16,)
    with pytest.raises(ValueError, match="a block of 11 where the run's is 8"):
        import_traces(steps, tmp_path / "eight", TraceArgs(candidates=[8]))  # 11 > 8: not a run at 8


def test_generate_decodes_one_prompt_in_the_engine_with_a_policys_plan(
        fake_binary, replay_store, test_zoo, tmp_path, monkeypatch):
    """Issue 55: generate runs in the engine too: a per-prompt setting on its server, a per-step plan on a
    patched server with the engine's cost table (compare --engine --steps saves it); a cost-aware policy
    without one is refused before any model loads."""
    from typer.testing import CliRunner

    from specpolicy.cli import app
    from specpolicy.engines.build import patch_digest

    runner, target, drafter = CliRunner(), *map(str, test_zoo)
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print: tmp_path)
    base = ["generate", "hi", "--engine", "llamacpp", "--server", str(fake_binary), "--target", target,
            "--drafter",
            drafter, "--max-new-tokens", "6"]
    result = runner.invoke(app, [*base, "--policy", "fixed8"])
    assert result.exit_code == 0, result.output
    assert "llama.cpp: n_max 7, p_min 0 (fixed8)" in result.output and "6 tokens" in result.output
    monkeypatch.setattr("specpolicy.models.load_pair", lambda *a, **k: pytest.fail("a model loaded"))
    result = runner.invoke(app, [*base, "--policy", "adaptive"])
    assert result.exit_code == 2 and "adaptive plans with a cost table" in result.output
    monkeypatch.undo()
    (tmp_path / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    monkeypatch.setenv("FAKE_PATCHED", "1")
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print: tmp_path)
    result = runner.invoke(app, ["compare", "--engine", "llamacpp", "--server", str(fake_binary), "--sweep",
                                 str(replay_store.path), "--policies", "fixed4", "--candidates", "1,2,4,8",
                                 "--steps", str(tmp_path / "steps")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "steps" / "fixed4.jsonl").is_file() and (tmp_path / "steps" / "costs.json").is_file()
    # issue 75: a second run into the same folder replaces the first whole (its fixed4.jsonl stayed beside the
    # second run's table), and a folder that is no run's is refused before any work
    compare = ["compare", "--engine", "llamacpp", "--server", str(fake_binary), "--sweep",
               str(replay_store.path), "--candidates", "1,2,4,8", "--steps"]
    assert runner.invoke(app, [*compare, str(tmp_path / "steps"), "--policies", "fixed2"]).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "steps").iterdir()) == ["costs.json", "fixed2.jsonl"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    monkeypatch.setattr("specpolicy.evaluation.engine_compare.compare_engine",
                        lambda *a, **k: pytest.fail("the engine ran"))
    refused = runner.invoke(app, [*compare, str(tmp_path / "mine"), "--policies", "fixed2"])
    assert refused.exit_code == 2 and "is not an earlier output of this command" in refused.output
    result = runner.invoke(app,
                           [*base, "--policy", "adaptive", "--costs", str(tmp_path / "steps" / "costs.json")])
    assert result.exit_code == 0, result.output
    assert "a per-step plan on the patched server (adaptive)" in result.output


def test_a_compare_in_the_engine_names_a_bad_server_before_any_model_loads(tmp_path, monkeypatch):
    """Reproduced: `SPECPOLICY_LLAMA_SERVER=FILE compare --engine llamacpp` swept its prompts with the
    models (3 s) and then refused the server."""
    from typer.testing import CliRunner

    from specpolicy.cli import app

    (tmp_path / "not-a-server").write_text("")
    monkeypatch.setenv("SPECPOLICY_LLAMA_SERVER", str(tmp_path / "not-a-server"))
    monkeypatch.setenv("SPECPOLICY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("specpolicy.models.load_pair", lambda *a, **k: pytest.fail("a model loaded"))
    result = CliRunner().invoke(app, ["compare", "--engine", "llamacpp", "--policies", "fixed16",
                                      "--max-samples", "1", "--max-new-tokens", "8"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: $SPECPOLICY_LLAMA_SERVER") and result.stderr.count("\n") == 1


def test_the_engine_check_table_on_stderr_keeps_every_policy_name_whole(fake_binary, replay_store, tmp_path,
                                                                         monkeypatch):
    """Seen in a log: compare --engine's table of measured against modelled speed, drawn on stderr at a
    pipe's 80 columns, cut the name `blockpilot-guard` to `blockpilot-gua…`."""
    from typer.testing import CliRunner

    from specpolicy.cli import app
    from specpolicy.engines.build import patch_digest

    monkeypatch.delenv("COLUMNS", raising=False)
    (tmp_path / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    monkeypatch.setenv("FAKE_PATCHED", "1")
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print: tmp_path)
    policy = "llamacpp-pmin:n_max=3,p_min=0"
    result = CliRunner().invoke(app, ["compare", "--engine", "llamacpp", "--server", str(fake_binary),
                                      "--sweep", str(replay_store.path), "--policies", f"fixed4,{policy}",
                                      "--candidates", "1,2,4,8"])
    assert result.exit_code == 0, result.output
    start = result.stderr.index("measured in llama.cpp")
    table = result.stderr[start:result.stderr.index("└", start)]
    assert "…" not in table and policy in "".join(table.split())
    assert max(map(len, table.splitlines())) <= 100


def test_a_store_without_a_cost_table_runs_cost_aware_policies_in_the_engine(
        fake_binary, replay_store, tmp_path, monkeypatch):
    """Seen running the cost twin: a sweep whose flagged table compare had dropped refused `compare --engine
    --policies blockpilot-guard` ("needs the machine's cost table"), though the engine measures its own table
    and prices the run with it."""
    import shutil

    from specpolicy.engines.build import patch_digest
    from specpolicy.evaluation.engine_compare import compare_engine
    from specpolicy.sweep.store import SweepStore

    shutil.copytree(replay_store.path, tmp_path / "store")
    (tmp_path / "store" / "latency.json").unlink()
    (tmp_path / "llama-server.json").write_text(json.dumps({"patch": patch_digest()}))
    monkeypatch.setenv("FAKE_PATCHED", "1")
    monkeypatch.setattr("specpolicy.engines.build.gguf_pair",
                        lambda target, drafter, out=None, report=print: tmp_path)
    policies = [create_policy(name, [1, 2, 4, 8]) for name in ("fixed4", "adaptive")]
    comparison = compare_engine(SweepStore.load(tmp_path / "store"), policies, server=fake_binary,
                                report=lambda line: None)
    assert [r.policy for r in comparison.run.results] == ["fixed4", "adaptive"]


@pytest.mark.parametrize(("name", "block_rule"), [("marginal8", False), ("adaptive-verify", True)])
def test_a_cost_aware_verify_length_is_a_value_a_patched_server_runs_and_a_stock_one_refuses(
        verify_store, name, block_rule):
    """Issue 76: (B, L) plans in the engine. marginal's and adaptive-verify's verify length carries its
    prices by (B, L) as a value; the patched engine gets it in the request's plan, beside the cost-aware block
    rule or a fixed B (one block, no plain steps); a stock one refuses the policy."""
    from specpolicy.cycles import CostAwareLength
    from specpolicy.evaluation.engine import engine_setting
    from specpolicy.evaluation.replay import prompt_observation

    record, costs = next(verify_store.records()), verify_store.latency()
    policy = create_policy(name, [1, 2, 4, 8])
    plan = policy.checked_plan(prompt_observation(verify_store, record, costs))
    assert isinstance(plan.length, CostAwareLength)
    request = json.loads(engine_setting(policy, plan, 16, per_request=True).plan)
    assert request["lengths"] == ([2, 4, 8] if block_rule else [8])
    assert request["length_seconds"][-1] == [costs.split_cycle_seconds(8, n) for n in range(1, 9)]
    assert (request["blocks"], request["ar_allowed"]) == (([2, 4, 8], True) if block_rule else ([8], False))
    with pytest.raises(ValueError, match="decides per cycle or sets verify lengths"):
        engine_setting(policy, plan, 16)
