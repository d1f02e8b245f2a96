"""Importing real models' acceptance traces (SpecDecode-Bench's JSONL): exact chain replay, refusals in one
line."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import TraceArgs, import_traces
from specpolicy.sweep.traces.profile import ProfileDraw
from specpolicy.sweep.traces.specdecode import import_specdecode

RNG = np.random.default_rng(0)


def _request(rid, n, tokens=None, longest=12):
    lengths = [int(x) for x in np.minimum(RNG.geometric(0.35, n), longest + 1)]
    other = [int(x) for x in RNG.integers(1, 4, n)]
    return {"id": rid, "prompt_token_ids": list(range(int(RNG.integers(3, 40)))),
            "generated_token_ids": list(range(n if tokens is None else tokens)),
            "acc_eagle": {"acc_len": lengths}, "acc_ngram": {"acc_len": other}}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _independent(lengths, block_size):
    """The authors' simulator by hand: the prefill gives token 1; a step at token k commits min(acc[k - 1],
    B), the last cut at the output's end as engines cut it (tau: the tokens committed per step)."""
    generated, cycles, tau = 1, 0, 0
    while generated < len(lengths):
        step = min(lengths[generated - 1], block_size, len(lengths) - generated)
        generated, cycles, tau = generated + step, cycles + 1, tau + step
    return cycles, tau / cycles


@pytest.fixture
def trace(tmp_path):
    rows = [_request(f"r{i}", int(RNG.integers(2, 120))) for i in range(20)]
    rows += [_request("short", 1), _request("mismatched", 50, tokens=47)]
    return _write(tmp_path / "combined_toy.jsonl", rows), rows


def test_the_store_holds_exactly_the_acceptance_arrays(trace, tmp_path):
    file, rows = trace
    result = import_specdecode(file, tmp_path / "store", candidates=range(1, 14))
    assert result.requests == 21
    assert result.skipped == {"short": "the prefill's token is the whole output: nothing to draft"}
    assert result.other_run_tokens == ["mismatched"] and result.longest_drafts == 12
    records = {r.prompt_id: r for r in SweepStore.load(tmp_path / "store").records()}
    assert set(records) == {f"toy:{r['id']}" for r in rows if r["id"] != "short"}
    for row in rows[:20] + rows[-1:]:
        lengths, record = row["acc_eagle"]["acc_len"], records[f"toy:{row['id']}"]
        table = record.table()
        assert table.output_length == len(lengths) and record.prompt_length == len(row["prompt_token_ids"])
        for j, b in enumerate(table.candidates):
            assert table.accepted[:, j].tolist() == [min(a - 1, b - 1) for a in lengths]
            cycles, tau = _independent(lengths, b)
            assert table.fixed_cycles([b]) == [cycles] and len(table.simulate(b)) == cycles
            assert record.taus[b] == pytest.approx(tau, rel=1e-12)


def test_reimporting_resumes_and_a_changed_file_is_refused(trace, tmp_path):
    file, rows = trace
    import_specdecode(file, tmp_path / "store", candidates=range(1, 9))
    import_specdecode(file, tmp_path / "store", candidates=range(1, 9))
    assert len(list(SweepStore.load(tmp_path / "store").records())) == 21
    _write(file, rows[:5])
    with pytest.raises(Exception, match="other settings"):
        import_specdecode(file, tmp_path / "store", candidates=range(1, 9))


@pytest.mark.parametrize("damage, message", [
    (lambda rows: rows.__setitem__(3, "not json"), "line 4 is not JSON"),
    (lambda rows: rows[2]["acc_eagle"]["acc_len"].__setitem__(5, -1),
     r"line 3 \(request r2\): acc_eagle.acc_len"),
    (lambda rows: rows[2]["acc_eagle"]["acc_len"].__setitem__(5, 0), "integers >= 1"),
    (lambda rows: rows[1]["acc_eagle"]["acc_len"].__setitem__(0, 2.5), "must be a list of integers"),
    (lambda rows: rows[0].pop("acc_eagle"), "line 1 has no 'acc_eagle' field"),
    (lambda rows: rows[0].pop("prompt_token_ids"), "no 'prompt_token_ids' field"),
    (lambda rows: rows[4].__setitem__("id", "r0"), "more than one decode is named damaged:r0"),
    (lambda rows: rows[2]["acc_eagle"]["acc_len"].__setitem__(-3, 1000),
     r"acc_len\[\d+\] = 1000 .* 3 tokens"),
])
def test_a_damaged_file_is_refused_in_one_line(trace, tmp_path, damage, message):
    _, rows = trace
    damage(rows)
    file = tmp_path / "damaged.jsonl"
    file.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    with pytest.raises(ValueError, match=message):
        import_specdecode(file, tmp_path / "store")
    assert not (tmp_path / "store").exists()  # refused before anything is written


def test_blocks_past_the_recorded_runs_and_unknown_drafters_are_refused(trace, tmp_path):
    file, _ = trace
    with pytest.raises(ValueError, match="longest accepted run is 12 drafts, so blocks \\[14, 16\\]"):
        import_specdecode(file, tmp_path / "store", candidates=[1, 8, 13, 14, 16])
    # up to 12 drafts
    assert import_specdecode(file, tmp_path / "auto").store.candidates == tuple(range(1, 14))
    with pytest.raises(ValueError, match="unknown drafter 'mtp'; the traces record eagle, ngram"):
        import_specdecode(file, tmp_path / "store", drafter="mtp")
    with pytest.raises(FileNotFoundError, match="missing; pass a SpecDecode-Bench file"):
        import_specdecode(tmp_path / "nope.jsonl", tmp_path / "store")


@pytest.mark.parametrize(("candidates", "message"), [
    ("4,8", "candidates must be a list of block sizes"),
    ([0], "block size must be an integer in 1..64"),
    ([4, 4], "must name distinct block sizes"),
    ([2.5], "block size must be an integer in 1..64"),
])
def test_the_librarys_candidates_are_checked_as_the_commands_are(trace, tmp_path, candidates, message):
    """From Python, candidates the command refuses were a TypeError ("4,8"), a hang ([0]: a replay that never
    ends), a raw validation error ([2.5]) or accepted ([4, 4])."""
    with pytest.raises(ValueError, match=message):
        import_traces(trace[0], tmp_path / "store", TraceArgs(candidates=candidates))
    assert not (tmp_path / "store").exists()


def test_import_then_compare_and_train_from_the_command_line(trace, tmp_path):
    file, _ = trace
    store, costs = tmp_path / "store", "specpolicy/zoo/measured/cast-h100-sxm-llama-3.1-8b-context-1024.json"
    ngram = CliRunner().invoke(app, ["import-traces", str(file), "--out", str(store), "--drafter", "ngram",
                                     "--candidates", "1-16"])
    assert ngram.exit_code == 2 and "the longest accepted run is 2 drafts" in ngram.output
    covered = CliRunner().invoke(app,
                                 ["import-traces", str(file), "--out", str(tmp_path / "ngram"), "--drafter",
                                       "ngram"])  # by default, every block the recording covers
    assert covered.exit_code == 0
    assert "replay is exact for block sizes 1..3" in " ".join(covered.output.split())
    result = CliRunner().invoke(app,
                                ["import-traces", str(file), "--out", str(store), "--candidates", "1-13"])
    assert result.exit_code == 0, result.output
    assert "imported 21 decodes" in result.output and "skipped request short" in result.output
    compare = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs", costs, "--policies",
                                       "fixed4,fixed8,oracle,oracle-step,adaptive", "--format", "json"])
    assert compare.exit_code == 0, compare.output
    rows = {r["policy"]: r for r in json.loads(compare.stdout)}
    best_other = max(rows[p]["speedup"] for p in ("fixed4", "fixed8", "oracle"))
    assert rows["oracle-step"]["speedup"] >= best_other > 0
    refused = CliRunner().invoke(app,
                                 ["train", "blockpilot", "--sweep", str(store), "--costs", costs, "--out",
                                       str(tmp_path / "bp")])
    assert refused.exit_code != 0 and "does not record (imported traces)" in refused.output


def test_a_chain_trace_is_priced_by_a_chain_drafters_table_found_by_name_from_any_folder(trace, tmp_path):
    file, _ = trace
    store = tmp_path / "runs" / "traces" / "gsm8k"  # the docs' command: the parent folders do not exist yet
    result = CliRunner().invoke(app,
                                ["import-traces", str(file), "--out", str(store), "--candidates", "1-13"])
    assert result.exit_code == 0, result.output
    policies = ["--policies", "fixed4,fixed8,oracle-step", "--format", "json"]
    flat = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs",
                                    "cast-h100-sxm-llama-3.1-8b-context-1024", *policies])
    assert flat.exit_code == 0, flat.output
    assert "records a chain drafter" in " ".join(flat.stderr.split()) and "--drafter eagle3" in flat.stderr
    chained = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs",
                                       "aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024.json", *policies])
    assert chained.exit_code == 0, chained.output
    assert "chain drafter" not in chained.stderr
    flat_rows, chain_rows = ({r["policy"]: r for r in json.loads(run.stdout)} for run in (flat, chained))
    # priced per drafted position, drafting 7 costs more than drafting 3, which one flat pass made equal
    assert chain_rows["fixed8"]["speedup"] / chain_rows["fixed4"]["speedup"] < \
        flat_rows["fixed8"]["speedup"] / flat_rows["fixed4"]["speedup"]


# Spec-Bench answers (evaluation/eval.py of hemingkx/Spec-Bench): per answer, choices[0] holds new_tokens per
# turn and accept_lengths per step over every turn, each the tokens that step committed (accepted drafts + 1)
def _answer(qid, category, turns_steps, **damage):
    steps = [a for turn in turns_steps for a in turn]
    choice = {"index": 0, "turns": ["..."] * len(turns_steps),
              "decoding_steps": [len(t) - 1 for t in turns_steps],
              "new_tokens": [sum(t) for t in turns_steps], "wall_time": [0.1] * len(turns_steps),
              "accept_lengths": steps} | damage
    return {"question_id": qid, "category": category, "answer_id": "x", "model_id": "m", "choices": [choice]}


@pytest.fixture
def answers(tmp_path):
    rows = [_answer(81, "writing", [[3, 1, 4, 2, 7], [1, 1, 5]]),
            _answer(91, "math_reasoning", [[2, 6, 1, 1]]),
            _answer(92, "rag", [[7] * 12 + [1]])]
    return _write(tmp_path / "eagle-answers.jsonl", rows), rows


def test_spec_bench_answers_replay_exactly_the_recorded_steps(answers, tmp_path):
    from specpolicy.registry import create_policy

    file, rows = answers
    result = import_traces(file, tmp_path / "store")
    assert result.requests == 4 and result.longest_drafts == 6 and "at B = 7 only" in result.exact_for
    store = SweepStore.load(tmp_path / "store")
    records = {r.prompt_id: r for r in store.records()}
    assert set(records) == {"eagle-answers:81", "eagle-answers:81:2", "eagle-answers:91", "eagle-answers:92"}
    assert store.candidates == (7,) and records["eagle-answers:92"].group == "rag"
    assert records["eagle-answers:81"].conversation == records["eagle-answers:81:2"].conversation
    steps = {"eagle-answers:81": [3, 1, 4, 2, 7], "eagle-answers:81:2": [1, 1, 5],
             "eagle-answers:91": [2, 6, 1, 1],
             "eagle-answers:92": [7] * 12 + [1]}
    for prompt_id, recorded in steps.items():
        cycles = records[prompt_id].table().simulate(7)
        assert [c.committed for c in cycles] == recorded
        assert [c.accepted for c in cycles] == [a - 1 for a in recorded]
        assert records[prompt_id].taus[7] == pytest.approx(np.mean(recorded))
    # Spec-Bench's speed.py tau
    pooled = sum(sum(s) for s in steps.values()) / sum(len(s) for s in steps.values())
    assert pooled == pytest.approx(np.mean([a for row in rows for a in row["choices"][0]["accept_lengths"]]))
    with pytest.raises(ValueError, match=r"missing \[8\]"):  # another block would visit other positions
        from specpolicy.evaluation.replay import check_policies

        check_policies([create_policy("fixed8", store.candidates)], store)


@pytest.mark.parametrize(("damage", "message"), [
    ({"accept_lengths": [3, 0, 4]}, "accept_lengths must be a list of integers >= 1"),
    ({"new_tokens": [5, 99]}, "do not split into its turns' new_tokens"),
    ({"accept_lengths": "3,1"}, "accept_lengths must be a list"),
    ({"accept_lengths": [], "new_tokens": []}, "an answer with no turns"),  # reported: dropped or a crash
])
def test_a_damaged_answer_is_refused_in_one_line(tmp_path, damage, message):

    file = _write(tmp_path / "a.jsonl",
                  [_answer(1, "qa", [[2, 3]]), _answer(2, "qa", [[3, 1], [1, 4]], **damage)])
    with pytest.raises(ValueError, match=message):
        import_traces(file, tmp_path / "store")
    assert not (tmp_path / "store").exists()
    with pytest.raises(ValueError, match="pass --candidates 7"):
        import_traces(_write(tmp_path / "b.jsonl", [_answer(1, "qa", [[7, 1]])]), tmp_path / "s2",
                      TraceArgs(candidates=[4]))
    with pytest.raises(ValueError, match="the one block size it drafted"):
        import_traces(_write(tmp_path / "c.jsonl", [_answer(1, "qa", [[7, 1]])]), tmp_path / "s3",
                      TraceArgs(candidates=[4, 8]))


def test_a_policy_past_an_imported_recording_gets_a_hint_that_works(trace, tmp_path):
    """Seen on the real traces: the shipped `cycle` policy (blocks up to 32) on a recording of 1..13 was told
    to `specpolicy sweep --candidates ...`, which an imported store cannot do."""
    from specpolicy.evaluation.compare import compare_sweep

    file, _ = trace
    import_specdecode(file, tmp_path / "store", candidates=range(1, 14))
    with pytest.raises(ValueError,
                       match=r"missing \[16, 20, 24, 32\]\); the imported recording covers no others") as e:
        compare_sweep(tmp_path / "store", ["fixed4", "cycle"])
    assert "specpolicy sweep" not in str(e.value)
    import_specdecode(file, tmp_path / "short", candidates=range(1, 5))  # the file records runs up to 13
    with pytest.raises(ValueError, match=r"missing \[8\]\); the file records more: import it again with "
                                         r"--candidates 1-13"):
        compare_sweep(tmp_path / "short", ["fixed4", "fixed8"])


# vLLM responses from a server started with --per-request-spec-decode-metrics detailed
# (docs/features/spec_decode: "Per-Request Acceptance Metrics"): metrics.speculative_decoding carries per-step
# accepted and drafted counts
def _response(rid, accepted, drafted=None, k=3, **damage):
    drafted = [k] * len(accepted) if drafted is None else drafted
    metrics = {"mean_acceptance_length": 1 + sum(accepted) / max(len(accepted), 1),
               "num_spec_steps": len(accepted),
               "num_accepted_draft_tokens": sum(accepted), "num_draft_tokens": sum(drafted),
               "num_spec_tokens": k,
               "per_step_accepted": accepted, "per_step_drafted": drafted} | damage
    return {"id": rid, "object": "chat.completion", "choices": [{"index": 0}],
            "metrics": {"speculative_decoding": metrics}}


@pytest.fixture
def responses(tmp_path):
    rows = [_response("a", [3, 0, 2, 1, 3]), _response("b", [0, 0, 1], drafted=[3, 0, 2]),
            _response("c", [2, 3])]
    rows.append({"id": "n2", "choices": [{}, {}], "metrics": {"speculative_decoding": None}})
    return _write(tmp_path / "vllm-run.jsonl", rows), rows


def test_vllm_responses_replay_exactly_the_recorded_steps(responses, tmp_path):
    file, rows = responses
    result = import_traces(file, tmp_path / "store")
    assert result.requests == 3 and result.skipped == {"n2": "no speculative decoding metrics (n > 1, or "
                                                       "nothing "
                                                             "drafted)"}
    assert "at B = 4 only" in result.exact_for and "2 of 10 steps drafted fewer than 3" in result.exact_for
    store = SweepStore.load(tmp_path / "store")
    assert store.candidates == (4,)
    for row in rows[:3]:
        accepted = row["metrics"]["speculative_decoding"]["per_step_accepted"]
        record = next(r for r in store.records() if r.prompt_id == f"vllm-run:{row['id']}")
        assert [c.accepted for c in record.table().simulate(4)] == accepted
        published = row["metrics"]["speculative_decoding"]["mean_acceptance_length"]
        assert record.taus[4] == pytest.approx(published)
    cli = CliRunner().invoke(app, ["import-traces", str(file), "--out", str(tmp_path / "cli")])
    assert cli.exit_code == 0 and "imported 3 decodes" in cli.output and "skipped request n2" in cli.output
    # the same fields per choice (vLLM's docs: --per-request-spec-decode-stats detailed), first choice read
    per_choice = [{"id": r["id"], "choices": [{"index": 0, "speculative_decoding_stats":
                                                r["metrics"]["speculative_decoding"]}]} for r in rows]
    again = import_traces(_write(tmp_path / "vllm-run.jsonl", per_choice), tmp_path / "per-choice")
    assert again.requests == 3 and again.exact_for == result.exact_for
    assert [r.taus for r in again.store.records()] == [r.taus for r in store.records()]


@pytest.mark.parametrize(("damage", "message"), [
    ({"per_step_accepted": None}, "must be lists of integers >= 0"),
    ({"per_step_drafted": [3, 3]}, "differ in length"),
    ({"per_step_accepted": [1, -1, 0]}, "must be lists of integers >= 0"),
    ({"per_step_drafted": [3, 1, 3]}, "accepted more than it drafted"),
    ({"per_step_drafted": [3, 4, 3]}, "drafted more than num_spec_tokens"),
    ({"num_spec_steps": 4}, "num_spec_steps is not the number of steps"),
    ({"num_accepted_draft_tokens": 9}, "does not add up to num_accepted_draft_tokens"),
    ({"num_spec_tokens": 0}, "num_spec_tokens must be an integer in 1..63"),
    ({"usage": {"completion_tokens": 8}}, r"completion_tokens 8 contradicts the steps \(9..11 tokens"),
    ({"usage": {"completion_tokens": 12}}, r"completion_tokens 12 contradicts"),  # reported: accepted
])
def test_a_damaged_vllm_response_is_refused_in_one_line(tmp_path, damage, message):
    usage = damage.pop("usage", None)
    row = _response("b", [3, 2, 2] if usage else [3, 2, 0], **damage) | ({"usage": usage} if usage else {})
    file = _write(tmp_path / "v.jsonl", [_response("a", [1, 2]), row])
    with pytest.raises(ValueError, match=f"line 2 \\(request b\\): .*{message}"):
        import_traces(file, tmp_path / "store")
    assert not (tmp_path / "store").exists()


# SGLang responses from a server started with --speculative-decoding-stats detailed (sgl-project/sglang #34814
# @622d048d): per verification step, verify_lengths (root + drafts verified) and accept_lengths (drafts
# accepted + bonus), raw; native under meta_info, OpenAI under sglext (one record a choice)
def _sglang(rid, accepted, verify, openai=False, tokens=None, **damage):
    stats = {"num_verification_steps": len(accepted), "num_verified_draft_tokens": sum(verify) - len(verify),
             "num_accepted_draft_tokens": sum(accepted), "mean_accept_length": 1 + np.mean(accepted),
             "verify_lengths": verify, "accept_lengths": [a + 1 for a in accepted]} | damage
    if openai:
        return {"id": rid, "object": "chat.completion", "choices": [{"index": 0}],
                "usage": {"completion_tokens": tokens}, "sglext": {"speculative_decoding_stats": [stats]}}
    return {"text": "...", "meta_info": {"id": rid, "completion_tokens": tokens,
                                         "speculative_decoding_stats": stats}}


def test_sglang_responses_native_and_openai_replay_exactly_the_recorded_steps(tmp_path):
    """Issue 74: SGLang's detailed stats, both forms, one store at B = the widest step verified (a
    verify-length rule's shorter steps replay as recorded); completion_tokens cuts the raw last step."""
    rows = [_sglang("a", [3, 0, 5, 1], [6, 6, 6, 6]), _sglang("b", [2, 0, 1], [6, 3, 4], openai=True),
            _sglang("c", [5, 5], [6, 6], tokens=10),
            {"meta_info": {"id": "d", "speculative_decoding_stats": None}},
            {"id": "e", "choices": [], "sglext": {"speculative_decoding_stats": []}}]  # no stats: skipped
    result = import_traces(_write(tmp_path / "sglang-run.jsonl", rows), tmp_path / "store")
    assert result.requests == 3 and set(result.skipped) == {"d", "e"}
    assert "at B = 6 only" in result.exact_for and "2 of 9 steps drafted fewer than 5" in result.exact_for
    store = SweepStore.load(tmp_path / "store")
    assert store.candidates == (6,) and store.meta["format"] == "sglang-per-request"
    records = {r.prompt_id: r for r in store.records()}
    assert [c.accepted for c in records["sglang-run:a"].table().simulate(6)] == [3, 0, 5, 1]
    assert [c.accepted for c in records["sglang-run:b"].table().simulate(6)] == [2, 0, 1]
    assert sum(c.committed for c in records["sglang-run:c"].table().simulate(6)) == 9  # 10 - the prefill's
    wider = import_traces(tmp_path / "sglang-run.jsonl", tmp_path / "b8", TraceArgs(candidates=[8]))
    assert wider.store.candidates == (8,)  # the block the server drafted, wider than any step verified
    with pytest.raises(ValueError, match="a block of 6; pass --candidates 6"):
        import_traces(tmp_path / "sglang-run.jsonl", tmp_path / "b4", TraceArgs(candidates=[4]))


@pytest.mark.parametrize(("row", "message"), [
    (_sglang("x", [1], [6], verify_lengths=None, accept_lengths=None),
     "summary stats only, no verify_lengths; start the server with --speculative-decoding-stats detailed"),
    (_sglang("x", [1, 2], [6]), "differ in length"),
    (_sglang("x", [1, 6], [6, 6]), "accepted more than it verified"),
    (_sglang("x", [1, 2], [6, 6], num_accepted_draft_tokens=9), "do not add up to"),
    (_sglang("x", [1, 2], [6, 6], tokens=3), r"completion_tokens 3 contradicts the steps \(4\.\.6 tokens"),
    ({"text": "", "meta_info": {"id": "x"}}, "not an SGLang response with speculative decoding stats"),
])
def test_a_damaged_sglang_response_is_refused_in_one_line(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        import_traces(_write(tmp_path / "s.jsonl", [_sglang("a", [1], [6]), row]), tmp_path / "store")
    assert not (tmp_path / "store").exists()


def _sglang_run(tmp_path, block, records, tokens=True):
    """The shipped sweep's decodes of ``records`` at ``block``, as SGLang records them (a file per run)."""
    rows = []
    for record in records:
        cycles = record.table().simulate(block)
        output = 1 + sum(c.committed for c in cycles) if tokens else None
        steps = [c.accepted for c in cycles]
        rows.append(_sglang(record.prompt_id, steps, [block] * len(cycles), tokens=output))
    return _write(tmp_path / f"run-b{block}.jsonl", rows)


def test_runs_at_several_blocks_import_into_one_store_where_per_prompt_choice_replays_exactly(tmp_path):
    """Issue 74: runs of the same prompts at blocks 4, 8 and 16 import into one store keyed by prompt; each
    block replays its own run exactly, the per-prompt oracle picks the fastest recorded run of each prompt (as
    the sweep the runs came from does), and a per-cycle rule (whose cycles would visit anchors no run saw) is
    refused before any work."""
    from specpolicy.costs import CostTable
    from specpolicy.evaluation.compare import compare_sweep
    from specpolicy.zoo import ZOO_DIR

    shipped = list(SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt").records())[:6]
    runs = [_sglang_run(tmp_path, b, shipped) for b in (4, 8, 16)]
    extra = _write(tmp_path / "extra.jsonl", [*map(json.loads, runs[1].read_text().splitlines()),
                                              _sglang("only-in-b8", [7], [8])])
    result = import_traces([runs[0], extra, runs[2]], tmp_path / "three")
    assert result.requests == 6 and result.skipped == {"only-in-b8": "not in every run (B = [4, 8, 16])"}
    store = SweepStore.load(tmp_path / "three")
    assert store.candidates == (4, 8, 16) and store.meta["runs"] == [4, 8, 16]
    costs = ZOO_DIR / "sweeps" / "sharegpt" / "latency.json"
    table = CostTable.load(costs)
    for record, original in zip(store.records(), shipped):
        for b in (4, 8, 16):
            assert [c.accepted for c in record.table().simulate(b)] == \
                [c.accepted for c in original.table().simulate(b)]
        assert record.table().fastest_fixed(table) == original.table().fastest_fixed(table, (4, 8, 16))
    rows = {r.row.policy: r.row for r in compare_sweep(tmp_path / "three", ["fixed4", "fixed8", "fixed16",
                                                                               "oracle"], costs=[costs])}
    assert rows["oracle"].speedup >= max(rows[f"fixed{b}"].speedup for b in (4, 8, 16))
    with pytest.raises(ValueError, match="recorded one block .*per-prompt ones"):
        compare_sweep(tmp_path / "three", ["adaptive"], costs=[costs], baseline="adaptive", oracle="adaptive")


def test_runs_with_their_prompts_carry_the_prefill_logits_blockpilot_reads(tmp_path):
    """Issue 74: an engine records no prefill logits; given the prompts it ran (by request id), the import
    computes them with the target as a sweep does, so BlockPilot compares on a store of runs and chooses what
    it chooses on the sweep the runs came from. A request without its prompt is refused, naming it."""
    from specpolicy.evaluation.compare import compare_sweep
    from specpolicy.evaluation.replay import prompt_observation
    from specpolicy.registry import create_policy
    from specpolicy.zoo import ZOO_DIR

    sweep = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
    shipped = list(sweep.records())[:8]
    runs = [_sglang_run(tmp_path, b, shipped) for b in (4, 8, 16)]
    args = TraceArgs(prefill=("sharegpt", "tiny", "tiny"))
    store = import_traces(runs, tmp_path / "runs", args).store
    for record, original in zip(store.records(), shipped, strict=True):
        assert (record.prompt_length, record.text_key) == (original.prompt_length, original.text_key)
        # the sweep's logits within a float16 step (computed again, not compared byte for byte)
        np.testing.assert_allclose(store.features(record), sweep.features(original), rtol=2e-3, atol=2e-3)
    costs = [ZOO_DIR / "sweeps" / "sharegpt" / "latency.json"]
    policy = create_policy("blockpilot", (4, 8, 16)).restrict((4, 8, 16))
    picks = [[policy.select(prompt_observation(s, r)) for r in records]
             for s, records in ((store, list(store.records())), (sweep, shipped))]
    assert picks[0] == picks[1] and len(set(picks[0])) > 1  # the same choices, and not one block for all
    rows = {r.row.policy: r.row for r in compare_sweep(tmp_path / "runs", ["blockpilot", "fixed4", "oracle"],
                                                       costs=costs, candidates=[4, 8, 16], baseline="fixed4")}
    assert rows["fixed4"].speedup <= rows["oracle"].speedup and rows["blockpilot"].tau > 0
    again = import_traces(runs, tmp_path / "runs", args).store  # an earlier import's logits are kept
    assert again.meta["prefill"] == {"prompts": "sharegpt", "target": "tiny", "drafter": "tiny"}
    with pytest.raises(ValueError, match=r"mt-bench holds no prompt with the id of request run-b4:sharegpt:"):
        import_traces(runs, tmp_path / "other", TraceArgs(prefill=("mt-bench", "tiny", "tiny")))


@pytest.mark.parametrize(("case", "message"), [
    ("same block twice", "a second run at B = 8"),
    ("other format", "several runs import into one store from vLLM or SGLang"),
    ("candidates", "no --candidates"),
    ("other outputs", "not one greedy decode"),
])
def test_runs_that_cannot_share_a_store_are_refused_in_one_line(tmp_path, answers, case, message):
    from specpolicy.zoo import ZOO_DIR

    shipped = list(SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt").records())[:3]
    b4, b8 = (_sglang_run(tmp_path, b, shipped) for b in (4, 8))
    files = {"same block twice": [b8, b8], "other format": [b4, answers[0]]}.get(case, [b4, b8])
    args = TraceArgs(candidates=[4, 8] if case == "candidates" else None)
    if case == "other outputs":  # the B = 8 run says its first request output one token fewer
        rows = [json.loads(line) for line in b8.read_text().splitlines()]
        rows[0]["meta_info"]["completion_tokens"] -= 1
        _write(b8, rows)
    with pytest.raises(ValueError, match=message):
        import_traces(files, tmp_path / "store", args)
    assert not (tmp_path / "store").exists()


def test_vllm_files_that_cannot_replay_are_refused_with_the_fix(tmp_path):
    summary = _response("a", [1, 2])
    for key in ("per_step_accepted", "per_step_drafted"):
        del summary["metrics"]["speculative_decoding"][key]
    cases = [([summary], "summary metrics only.*--per-request-spec-decode-metrics detailed"),
             ([_response("a", [1]), _response("b", [4, 0], k=5)], r"num_spec_tokens \[3, 5\] are mixed"),
             ([{"id": "a", "choices": [], "metrics": {"speculative_decoding": None}}], "no response carries"),
             ([{"id": "a", "object": "chat.completion", "choices": []}],
              "no 'metrics' field: not a vLLM response.*"
              "--per-request-spec-decode-metrics detailed")]
    for n, (rows, message) in enumerate(cases):
        with pytest.raises(ValueError, match=message):
            import_traces(_write(tmp_path / f"{n}.jsonl", rows), tmp_path / f"store{n}")
    with pytest.raises(ValueError, match="a block of 4; pass --candidates 4"):
        import_traces(_write(tmp_path / "k.jsonl", [_response("a", [1])]), tmp_path / "s",
                      TraceArgs(candidates=[8]))


# Model-Optimizer's speculation_profile.json (examples/specdec_bench/specdec_bench/speculation_profile.py,
# schema 1.0)
def _profile(path, rates=(0.8, 0.5, 0.25), model="chain_analytic", **fields):
    marginal = np.cumprod(rates).tolist()
    body = {"schema_version": "1.0", "measured": True, "method": "eagle3",
            "num_speculative_tokens": len(rates),
            "verification_method": "longest_prefix", "conditional_accept_rates": list(rates),
            "marginal_accept_rates": marginal, "mean_accept_length": 1 + sum(marginal),
            "accept_length_model": model} | fields
    path.write_text(json.dumps(body, indent=2))
    return path


def test_a_profile_draws_decodes_with_its_rates_and_seed(tmp_path):

    file = _profile(tmp_path / "speculation_profile.json")
    draw = ProfileDraw(requests=50, tokens=400, seed=3)
    result = import_traces(file, tmp_path / "store", TraceArgs(draw=draw))
    assert result.requests == 50 and "seed 3" in result.exact_for and "noise" in result.exact_for
    store = SweepStore.load(tmp_path / "store")
    assert store.candidates == (1, 2, 3, 4) and store.meta["seed"] == 3
    drafts = np.concatenate([r.table().accepted[:, -1] for r in store.records()])  # 20,000 positions
    # P(at least j drafts accepted), within 5 standard errors
    for j, marginal in enumerate([0.8, 0.4, 0.1], 1):
        assert abs(np.mean(drafts >= j) - marginal) < 5 * np.sqrt(marginal * (1 - marginal) / drafts.size)
    taus = [r.taus[4] for r in store.records()]
    assert abs(np.mean(taus) - 2.3) < 0.05  # the profile's mean accept length, 1 + sum of marginals
    again = import_traces(file, tmp_path / "again", TraceArgs(draw=draw)).store
    other = import_traces(file, tmp_path / "other", TraceArgs(draw=ProfileDraw(50, 400, seed=4))).store
    first = [r.replay.accepted for r in store.records()]
    assert first == [r.replay.accepted for r in again.records()]
    assert first != [r.replay.accepted for r in other.records()]


@pytest.mark.parametrize(("fields", "message"), [
    ({"measured": False}, "unmeasured stub"),
    ({"verification_method": "block"}, "verification_method 'block'"),
    ({"conditional_accept_rates": [0.8, 0.5]}, "must hold num_speculative_tokens rates"),
    ({"conditional_accept_rates": [0.8, 1.5, 0.2]}, r"rates in \[0, 1\]"),
    ({"num_speculative_tokens": "3"}, "must be an integer"),
])
def test_a_profile_that_cannot_be_drawn_is_refused_in_one_line(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        import_traces(_profile(tmp_path / "p.json", **fields), tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_a_block_drafters_profile_covers_its_one_block(tmp_path):
    file = _profile(tmp_path / "p.json", rates=(0.9,) * 7, model="measured_per_k", method="dflash")
    assert import_traces(file, tmp_path / "store").store.candidates == (8,)
    with pytest.raises(ValueError, match="a chain profile at K = 3 covers blocks 1..4"):
        import_traces(_profile(tmp_path / "chain.json"), tmp_path / "s3", TraceArgs(candidates=[2, 8]))
    with pytest.raises(ValueError,
                       match="dflash drafter's profile at K = 7 covers block 8 only; pass --candidates"):
        import_traces(file, tmp_path / "s2", TraceArgs(candidates=[4, 8]))


def test_a_vllm_run_replays_as_the_per_position_trace_it_came_from(trace, tmp_path):
    """The same decode through two importers: a per-position trace, and the per-step metrics vLLM reports for
    a fixed K = 7 run over it (the authors' simulator rule; the last step cut at the output by usage)."""
    from specpolicy.evaluation.compare import compare_sweep

    file, rows = trace
    responses = []
    for row in rows:
        lengths, generated, steps = row["acc_eagle"]["acc_len"], 1, []
        while generated < len(lengths):
            steps.append(min(lengths[generated - 1], 8) - 1)
            generated += steps[-1] + 1
        if steps:
            responses.append(_response(row["id"], steps,
                                       k=7) | {"usage": {"completion_tokens": len(lengths)}})
    vllm = _write(tmp_path / "toy-k7.jsonl", responses)
    import_specdecode(file, tmp_path / "positions", candidates=[8])
    import_traces(vllm, tmp_path / "steps", TraceArgs(dataset="toy"))
    costs = ["specpolicy/zoo/measured/cast-h100-sxm-llama-3.1-8b-context-1024.json"]
    positions, steps = (compare_sweep(tmp_path / s, ["fixed8"], costs=costs)[0].row
                        for s in ("positions", "steps"))
    assert steps.speedup == pytest.approx(positions.speedup,
                                          rel=1e-9) and steps.tau == pytest.approx(positions.tau)
    uncut = _write(tmp_path / "uncut.jsonl",
                   [{k: v for k, v in r.items() if k != "usage"} for r in responses])
    import_traces(uncut, tmp_path / "uncut", TraceArgs(dataset="toy"))
    assert compare_sweep(tmp_path / "uncut", ["fixed8"],
                         costs=costs)[0].row.speedup != pytest.approx(positions.speedup)


# What a hostile user found (issue 54): imports that lost or mixed records
def test_repeated_or_colliding_ids_are_refused_by_every_importer_naming_them(answers, responses, tmp_path):
    answer_file, answer_rows = answers
    twice = _write(tmp_path / "twice.jsonl", [*answer_rows, answer_rows[1]])
    collide = _write(tmp_path / "collide.jsonl", [*answer_rows, _answer("81:2", "rag", [[2, 1]])])
    vllm_file, vllm_rows = responses
    vllm_twice = _write(tmp_path / "vtwice.jsonl", [*vllm_rows, vllm_rows[0]])
    for n, (file,
            named) in enumerate([(twice, "twice:91"), (collide, "collide:81:2"), (vllm_twice, "vtwice:a")]):
        with pytest.raises(ValueError, match=f"more than one decode.*{named}"):
            import_traces(file, tmp_path / f"store{n}")
        assert not (tmp_path / f"store{n}").exists()  # nothing a retry trips on


def test_a_profile_reimported_with_other_draw_settings_is_refused_naming_the_flag(tmp_path):

    file = _profile(tmp_path / "speculation_profile.json")
    import_traces(file, tmp_path / "store", TraceArgs(draw=ProfileDraw(requests=5, tokens=16)))
    for draw, flag in ((ProfileDraw(requests=8, tokens=16), "requests"), (ProfileDraw(5, 32), "tokens")):
        with pytest.raises(ValueError, match=f"{flag}: stored"):
            import_traces(file, tmp_path / "store", TraceArgs(draw=draw))
    store = SweepStore.load(tmp_path / "store")
    assert len(list(store.records())) == 5 and store.meta["tokens"] == 16


def test_a_refused_or_interrupted_import_leaves_nothing_a_retry_trips_on(answers, tmp_path, monkeypatch):
    file, rows = answers
    bad = _write(tmp_path / "bad.jsonl", [rows[0], _answer(91, "x", [[2, 6]], new_tokens=[99])])
    with pytest.raises(ValueError, match="damaged"):
        import_traces(bad, tmp_path / "store")
    assert not (tmp_path / "store").exists()

    def full_disk(self, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SweepStore, "append", full_disk)
    with pytest.raises(OSError, match="No space"):
        import_traces(file, tmp_path / "store")
    assert not (tmp_path / "store").exists()
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn line left for the store's reader to warn about
        assert len(list(import_traces(file, tmp_path / "store").store.records())) == 4


@pytest.mark.parametrize(("rows", "message"), [
    ([_response("a", [1, 2], k=100)], "num_spec_tokens must be an integer in 1..63"),
])
def test_impossible_counts_are_refused(tmp_path, rows, message):
    with pytest.raises(ValueError, match=message):
        import_traces(_write(tmp_path / "v.jsonl", rows), tmp_path / "store")


def test_an_impossible_accepted_run_and_a_huge_draw_are_refused(trace, tmp_path):

    _, rows = trace
    rows[0]["acc_eagle"]["acc_len"][0] = 10**30
    with pytest.raises(ValueError, match="line 1 .*acc_eagle.acc_len"):
        import_specdecode(_write(tmp_path / "huge.jsonl", rows), tmp_path / "store")
    with pytest.raises(ValueError, match="--tokens"):
        import_traces(_profile(tmp_path / "p.json"), tmp_path / "p",
                      TraceArgs(draw=ProfileDraw(200, 200_000_000)))


def test_every_hint_on_an_imported_store_names_a_fix_that_works_there(answers, tmp_path):
    """Issue 54: no --costs was told to sweep; confidences to sweep with --verify-lengths; train cycle could
    not train on a recording to 13; serving a per-step store failed on B = 1; a --candidates subset was told
    to sweep."""
    from specpolicy.zoo import MEASURED_DIR

    rows = [_request(f"r{i}", int(RNG.integers(30, 90))) for i in range(40)]
    trace = _write(tmp_path / "combined_toy.jsonl", rows)
    table = str(MEASURED_DIR / "cast-h100-sxm-llama-3.1-8b-context-1024.json")
    runner, store = CliRunner(), str(tmp_path / "store")
    assert runner.invoke(app, ["import-traces", str(trace), "--out", store]).exit_code == 0
    no_costs = runner.invoke(app, ["compare", "--sweep", store, "--policies", "fixed4,fixed8"])
    assert no_costs.exit_code == 0 and "pass --costs FILE" in " ".join(no_costs.output.split())
    assert "sweep --mode replay" not in no_costs.output
    unread = runner.invoke(app,
                           ["compare", "--sweep", store, "--policies", "fixed4,threshold", "--costs", table])
    assert unread.exit_code == 2 and "compare policies that read none" in unread.output
    subset = runner.invoke(app,
                           ["compare", "--sweep", store, "--policies", "fixed4,fixed12", "--costs", table,
                                 "--candidates", "1,2,4,8"])
    assert subset.exit_code == 2 and "add them to --candidates (the sweep holds them)" in subset.output
    trained = runner.invoke(app,
                            ["train", "cycle", "--sweep", store, "--out", str(tmp_path / "cycle"), "--costs",
                                  table])
    assert trained.exit_code == 0, trained.output
    untimed = runner.invoke(app, ["train", "logreg", "--sweep", store, "--out", str(tmp_path / "lr")])
    assert untimed.exit_code == 2 and "pass --costs FILE" in untimed.output

    answer_file, _ = answers
    per_step = str(tmp_path / "answers")
    assert runner.invoke(app, ["import-traces", str(answer_file), "--out", per_step]).exit_code == 0
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2)).save(tmp_path / "batch.json")
    served = runner.invoke(app,
                           ["compare", "--sweep", per_step, "--policies", "fixed7", "--baseline", "fixed7",
                                 "--concurrency", "1,2", "--batch-costs", str(tmp_path / "batch.json")])
    assert served.exit_code == 0, served.output


def test_a_compare_of_imported_traces_claims_no_temperature_or_threads_it_did_not_run(trace, tmp_path):
    """Reported: every `compare --sweep` was titled with the command's own --temperature and --threads
    defaults ("T=0, 1 thread(s)"), which a stored sweep ignores: an import records neither, a replay sweep
    its own temperature."""
    store = tmp_path / "store"
    assert CliRunner().invoke(app, ["import-traces", str(trace[0]), "--out", str(store), "--candidates",
                                    "1-13"]).exit_code == 0
    compare = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs",
                                       "aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024", "--policies",
                                       "fixed4,oracle"])
    assert compare.exit_code == 0, compare.output
    title = " ".join(compare.stdout.split("┏")[0].split())
    assert "specpolicy compare: replay" in title and "T=" not in title and "thread" not in title


def test_the_plot_of_imported_traces_claims_no_temperature_it_did_not_run(trace, tmp_path, monkeypatch):
    """Reproduced after the table's title was mended: `compare --sweep IMPORTED --plot` still titled its plot
    "replay, T=0" (the command's ignored --temperature default)."""
    from specpolicy.evaluation import report

    titles = []
    monkeypatch.setattr(report, "plot_comparison", lambda results, path, title: titles.append(title))
    store = tmp_path / "store"
    assert CliRunner().invoke(app, ["import-traces", str(trace[0]), "--out", str(store), "--candidates",
                                    "1-13"]).exit_code == 0
    compare = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs",
                                       "aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024", "--policies",
                                       "fixed4,oracle", "--plot", str(tmp_path / "plot.png")])
    assert compare.exit_code == 0, compare.output
    assert titles == ["store: replay"]


def test_a_policy_reading_prefill_logits_on_an_import_is_told_what_records_them(trace, tmp_path):
    """Issue 74: an engine's records carry no prefill logits, so BlockPilot cannot read an import made without
    the prompts; the refusal says so and names what computes them (the import with the prompts it ran)."""
    from specpolicy.evaluation.compare import compare_sweep

    store = import_traces(trace[0], tmp_path / "store", TraceArgs(candidates=list(range(1, 14)))).store
    with pytest.raises(ValueError, match=r"blockpilot reads the prefill logits, .*\(an engine records none: "
                                         r"import again with `specpolicy import-traces --prompts FILE "
                                         r"--target MODEL`"):
        compare_sweep(store.path, ["blockpilot", "fixed4"],
                      costs=["aic-h100-sxm-vllm-llama-3.1-8b-eagle3-context-1024"])


def test_an_import_without_prompt_tokens_splits_by_request(tmp_path):
    """Found by this stop's BlockPilot-on-runs check: every per-step import recorded the digest of no prompt
    tokens, the same for every request, which the train/validation split reads as one shared input: the whole
    store fell on the training side, and `compare --split validation` found no prompts (reported as a store
    without prefill logits). Requests without their tokens now split by request, as a sweep's prompts do."""
    from specpolicy.zoo import ZOO_DIR

    shipped = list(SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt").records())[:60]
    store = import_traces(_sglang_run(tmp_path, 8, shipped), tmp_path / "store").store
    sides = [len(list(SweepStore.load(store.path, split).records())) for split in ("train", "validation")]
    assert sum(sides) == 60 and min(sides) > 0
