"""The engine tier: llama.cpp's own llama-server on the shipped pair (skipped, saying why, where it is not
built: ``specpolicy engine build``). Greedy outputs with DFlash equal the engine's plain decoding and
specpolicy's recorded outputs; the engine's accepted drafts per cycle equal specpolicy's replay; compare and
export run end to end and leave no server behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.cycles import Plan
from specpolicy.engines.build import find_server
from specpolicy.engines.llamacpp import ServerPool, Setting
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR
from tests.engines.test_llamacpp import _gone

pytestmark = pytest.mark.engine
SHIPPED = ZOO_DIR / "sweeps" / "sharegpt"
PROMPTS = 8


@pytest.fixture(scope="module")
def engine() -> tuple[Path, Path]:
    """(llama-server, the folder of the shipped pair's GGUF files)."""
    try:
        binary = find_server()
    except ValueError as error:
        pytest.skip(f"engine tier skipped: {error}")
    from specpolicy.engines.build import gguf_pair

    return binary, gguf_pair("tiny", "tiny")


def _servers_running() -> int:
    found = subprocess.run(["pgrep", "-f", "llama-server"], capture_output=True, text=True)
    return len(found.stdout.split())


def subset_store(out: Path, count: int) -> SweepStore:
    """The first ``count`` prompts of the shipped held-out sweep, as a store of their own."""
    shipped = SweepStore.load(SHIPPED)
    meta = {k: v for k, v in shipped.meta.items() if k != "schema"}
    with SweepStore.open(out, meta) as store:
        for record in list(shipped.records())[:count]:
            store.append(record.model_copy(update={"features": None}), shipped.features(record))
    (out / "latency.json").write_bytes((SHIPPED / "latency.json").read_bytes())
    return SweepStore.load(out)


def test_dflash_outputs_equal_plain_decoding_and_specpolicys_recorded_greedy_outputs(engine):
    binary, folder = engine
    records = list(SweepStore.load(SHIPPED).records())[:PROMPTS]
    settings = [Setting(1), Setting(16), Setting(8), Setting(4), Setting(16, 0.5)]
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", 1) as pool:
        for record in records:
            prompt = list(record.replay.sequence[:record.prompt_length])
            recorded = tuple(record.replay.sequence[record.prompt_length:][:record.output_length])
            outputs = {s: pool[s].complete(prompt, record.replay.budget).tokens for s in settings}
            assert all(out == outputs[Setting(1)] for out in outputs.values()), record.prompt_id
            assert outputs[Setting(1)] == recorded, record.prompt_id


def _settled_log(server, quiet: float = 0.3, longest: float = 10.0) -> str:
    """The server's log once it has stopped growing for ``quiet`` seconds: llama.cpp writes its log from a
    worker thread, so a reply can arrive before its last cycles' lines (a loaded machine showed it)."""
    import time

    text, deadline = server.log_text(), time.monotonic() + longest
    while time.monotonic() < deadline:
        time.sleep(quiet)
        again = server.log_text()
        if again == text:
            break
        text = again
    return text


@pytest.mark.parametrize(("policy", "prompts"), [("fixed16", 4), ("llamacpp-pmin", 8)])
def test_the_engines_drafts_and_accepted_drafts_per_cycle_equal_replay_as_the_budget_caps_them(
        engine, monkeypatch, policy, prompts):
    """llama.cpp drafts at most the tokens left in the budget minus one (``get_n_draft_max``; none with one
    left: a plain step); replay drafts whole blocks. Capped the same way, every cycle drafts and accepts as
    many tokens, until two float32 implementations break a near-tie of the drafter differently (seen once in 8
    prompts at B = 4: a draft whose top-1 probability was 0.029), where the cycles part at an accepted count,
    never at a drafted one; the server's counts are the sums of its cycles (``llamacpp-pmin``: llama.cpp's
    defaults, B = 4)."""
    from specpolicy.evaluation.engine import deployable_settings
    from specpolicy.registry import create_policy

    monkeypatch.setenv("LLAMA_TRACE", "1")  # the server logs "accepted A/D draft tokens" per cycle
    binary, folder = engine
    (setting,) = deployable_settings(create_policy(policy, [1, 4, 16]), 16)
    agreeing = 0
    for record in list(SweepStore.load(SHIPPED).records())[:prompts]:
        with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", 1) as pool:
            route = pool[setting]
            # a patched binary: the one DFlash server behind the setting
            server = getattr(route, "server", route)
            warmed = len(_settled_log(server))  # the warm-up request's cycles come first
            reply = route.complete(list(record.replay.sequence[:record.prompt_length]), record.replay.budget)
            log = _settled_log(server)[warmed:]
        engine_cycles = [tuple(map(int, pair)) for pair in re.findall(r"accepted\s+(\d+)/\s*(\d+) draft",
                                                                      log)]
        replayed, left = [], record.output_length - 1
        for cycle in record.table().simulate(Plan.fixed(setting.block_size)):
            if left > 1:
                drafted = min(setting.block_size - 1, left - 1)
                replayed.append((min(cycle.accepted, drafted), drafted))
            left -= cycle.committed
        assert (reply.accepted, reply.drafted) == tuple(map(sum, zip(*engine_cycles)))
        parted = next((i for i, (a, b) in enumerate(zip(engine_cycles, replayed)) if a != b), None)
        if parted is None:
            assert engine_cycles == replayed
            agreeing += 1
        else:  # a draft token differs: the same block, another accepted count
            assert engine_cycles[parted][1] == replayed[parted][1], (record.prompt_id, parted)
    assert agreeing >= prompts // 2


def test_a_patched_server_takes_each_requests_block_and_returns_every_step(engine):
    """The patch set, checked by what the engine does, not by its request schema: the drafted counts move with
    each request's n_max on one server, a request's p_min cuts where the recorded probability falls below it,
    the step records add up to the server's own counts, and every output equals plain decoding's."""
    from specpolicy.engines.build import patched

    binary, folder = engine
    if not patched(binary):
        pytest.skip("a stock llama-server (built without specpolicy's patch set): per-request settings are "
                    "compiled "
                    "out; `specpolicy engine build` builds the patched one")
    records = list(SweepStore.load(SHIPPED).records())[:3]
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", 1) as pool:
        for record in records:
            prompt, budget = list(record.replay.sequence[:record.prompt_length]), record.replay.budget
            replies = {s: pool[s].complete(prompt, budget) for s in (Setting(1), Setting(4), Setting(16),
                                                                      Setting(16, 0.9))}
            assert len(pool.servers) == 2  # plain decoding's, and one DFlash server for every setting
            assert all(r.tokens == replies[Setting(1)].tokens for r in replies.values()), record.prompt_id
            assert replies[Setting(4)].drafted < replies[Setting(16)].drafted
            for setting, reply in replies.items():
                if setting.block_size == 1:
                    assert reply.steps == () and reply.drafted == 0
                    continue
                assert max(s.drafted for s in reply.steps) == setting.block_size - 1
                assert (sum(s.verified for s in reply.steps), sum(s.accepted for s in reply.steps)) == (
                    reply.drafted, reply.accepted)
                for step in reply.steps:
                    assert len(step.probabilities) == step.drafted
                    assert step.accepted <= step.verified <= step.drafted
                    assert all(0.0 <= p <= 1.0 for p in step.probabilities)
                    # the cut reads llama.cpp's top-1 over its top 10, never below the whole-vocabulary record
                    first_cut = step.probabilities[step.verified:][:1]
                    assert all(p < setting.p_min for p in first_cut)
                assert any(s.verified < s.drafted for s in reply.steps) == (setting.p_min > 0)


@pytest.mark.parametrize(("policy", "table"), [("adaptive", None), ("blockpilot-guard", None),
                                               ("adaptive", "tests/fixtures/costs-llamacpp-engine-cpu.json")])
def test_a_per_step_plan_runs_inside_a_patched_server_deciding_as_replay(engine, policy, table):
    """The cost-aware rule as a value, sent with each request: the engine picks every step's B itself, and its
    decisions equal replay's cycle for cycle (priced with the same table: the shipped one, and the engine's
    own, under which its probes are gated), the decode's last plain step recorded too; every output equals
    plain decoding's."""
    from specpolicy.costs import CostTable
    from specpolicy.engines.build import patched
    from specpolicy.evaluation.engine import PLAIN, engine_setting
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy

    binary, folder = engine
    if not patched(binary):
        pytest.skip("a stock llama-server (built without specpolicy's patch set) runs no per-step plan")
    store = SweepStore.load(SHIPPED)
    sizes = [b for b in store.candidates if b <= 16] if table is None else [1, 2, 4, 8, 12, 16]
    chosen, costs = create_policy(policy, sizes), CostTable.load(table) if table else store.latency()
    agreeing = total = 0
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", 1) as pool:
        for record in list(store.records())[:4]:
            plan = chosen.checked_plan(prompt_observation(store, record, costs))
            setting = engine_setting(chosen, plan, 16, per_request=True)
            assert setting.plan and len(pool.servers) <= 2
            prompt, budget = list(record.replay.sequence[:record.prompt_length]), record.replay.budget
            reply = pool[setting].complete(prompt, budget)
            assert reply.tokens == pool[PLAIN].complete(prompt, budget).tokens, record.prompt_id
            engine_sizes = [s.block for s in reply.steps]
            replayed = [c.block_size for c in record.table().simulate(plan, store.features(record))]
            assert len(engine_sizes) == len(replayed), (record.prompt_id, engine_sizes[-3:], replayed[-3:])
            agreeing += next((i for i, (a, b) in enumerate(zip(engine_sizes, replayed)) if a != b),
                             len(engine_sizes))
            total += len(replayed)
    assert agreeing >= 0.95 * total


@pytest.mark.parametrize(("policy", "sizes"), [("marginal16", [1, 8, 16]), ("adaptive-verify", [1, 8, 16])])
def test_a_cost_aware_verify_length_runs_inside_a_patched_server_as_the_rule_decides(engine, policy, sizes):
    """Issue 76: (B, L) plans in the engine. The marginal verify length (beside a fixed B, or beside the
    cost-aware block rule) is a value sent with each request: on every step the server keeps the L - 1
    drafts that the same rule picks from its drafter's probabilities (exactly what specpolicy's rule picks
    from them), cutting some blocks; every output equals plain decoding's; and its L equals replay's, the
    rule read on the sweep's recorded confidences at the same anchor, on >= 95% of steps (the drafter's
    probabilities over the whole vocabulary, as the sweep records them, not renormalized over its top 10:
    0 of 177 agreed before; a difference left is a near-tie, the two runtimes' probabilities differing in
    the third decimal)."""
    from specpolicy.engines.build import patched
    from specpolicy.evaluation.engine import PLAIN, engine_setting
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy
    from specpolicy.state import DraftedBlock

    binary, folder = engine
    if not patched(binary):
        pytest.skip("a stock llama-server (built without specpolicy's patch set) runs no per-step plan")
    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt-verify")
    chosen, costs = create_policy(policy, sizes), store.latency()
    steps = cut = agreeing = total = 0
    with ServerPool(binary, folder / "target.gguf", folder / "drafter.gguf", 1) as pool:
        for record in list(store.records())[:4]:
            plan = chosen.checked_plan(prompt_observation(store, record, costs))
            prompt, budget = list(record.replay.sequence[:record.prompt_length]), record.replay.budget
            reply = pool[engine_setting(chosen, plan, 16, per_request=True)].complete(prompt, budget)
            assert reply.tokens == pool[PLAIN].complete(prompt, budget).tokens, record.prompt_id
            table, anchor = record.table(), record.prompt_length
            for step in reply.steps:
                if step.block > 1 and step.drafted:
                    chosen_length = plan.length(None, DraftedBlock(step.block, step.probabilities))
                    assert step.verified + 1 == chosen_length, (record.prompt_id, step)
                    steps, cut = steps + 1, cut + (step.verified < step.drafted)
                if step.block > 1 and step.drafted == step.block - 1:  # not cut by the budget
                    replayed = plan.length(None, table.drafted_block(anchor, step.block))
                    agreeing, total = agreeing + (step.verified + 1 == replayed), total + 1
                anchor += step.accepted + 1
    assert steps > 20 and cut > 0
    assert agreeing >= 0.95 * total, (agreeing, total)


def test_compare_in_the_engine_runs_end_to_end_and_leaves_no_server(engine, tmp_path):
    store = subset_store(tmp_path / "held-out", 6)
    before = _servers_running()
    result = CliRunner().invoke(app,
                                ["compare", "--engine", "llamacpp", "--sweep", str(store.path), "--policies",
                                      "fixed16,blockpilot,llamacpp-pmin,oracle", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"policy": "llamacpp-pmin"' in result.stdout and "meas/model" in result.stderr
    assert "lossless: 0 of" in result.stderr
    assert _servers_running() == before


@pytest.mark.parametrize("policy", ["fixed16", "blockpilot", "llamacpp-pmin"])
def test_exported_command_lines_start_servers_that_decode_as_recorded(engine, policy, tmp_path):
    """Each server export wrote starts from its exact command line (on a free port) and decodes greedily as
    specpolicy recorded, speculating where its block size says so."""
    import json

    from specpolicy.engines.llamacpp import Server, _free_port

    out = tmp_path / "export.json"
    result = CliRunner().invoke(app, ["export", policy, "--engine", "llamacpp", "--out", str(out)])
    assert result.exit_code == 0, result.output
    record = next(SweepStore.load(SHIPPED).records())
    sequence = record.replay.sequence
    prompt, recorded = sequence[:record.prompt_length], sequence[record.prompt_length:]
    for exported in json.loads(out.read_text())["servers"]:
        command, port = list(exported["command"]), _free_port()
        command[command.index("--port") + 1] = str(port)
        server = Server(command, port)
        try:
            server._wait_healthy()
            reply = server.complete(list(prompt), record.replay.budget)
        finally:
            server.stop()
        assert reply.tokens == tuple(recorded[:record.output_length])
        assert (reply.drafted > 0) == (exported["block_size"] > 1), exported["setting"]


def test_ctrl_c_during_an_engine_compare_leaves_no_server(engine, tmp_path):
    """SIGINT (Ctrl-C) once the servers run: the command ends and every server it started is gone."""
    import signal
    import sys
    import time

    store = subset_store(tmp_path / "held-out", 6)
    command = [sys.executable, "-m", "specpolicy.cli", "compare", "--engine", "llamacpp", "--sweep",
               str(store.path),
               "--policies", "fixed16,llamacpp-pmin"]
    # a file, not a pipe nobody reads while waiting (a full pipe blocks the writer)
    log = tmp_path / "stderr.txt"
    with log.open("w") as errors:
        # Ctrl-C as a terminal delivers it, however the suite was started (a shell's background job inherits
        # SIGINT ignored, and Python then installs no KeyboardInterrupt: seen when CI ran as `(.ci/run &)`)
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, text=True,
                                   env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline, servers = time.monotonic() + 120, []
    while time.monotonic() < deadline and not servers:
        found = subprocess.run(["pgrep", "-P", str(process.pid), "-f", "llama-server"], capture_output=True,
                               text=True)
        servers = [int(pid) for pid in found.stdout.split()]
        time.sleep(0.1)
    assert servers and process.poll() is None, log.read_text()
    process.send_signal(signal.SIGINT)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:  # say where it hangs: faulthandler dumps every thread on SIGABRT
        process.send_signal(signal.SIGABRT)
        process.wait(10)
        pytest.fail(f"the command did not end within 60 s of Ctrl-C:\n{log.read_text()[-4000:]}")
    assert process.returncode != 0
    assert all(_gone(pid) for pid in servers)
