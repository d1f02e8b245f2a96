"""Importing real models' acceptance traces (SpecDecode-Bench's JSONL): exact chain replay, refusals in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specpolicy.cli import app
from specpolicy.sweep.importers import import_specdecode
from specpolicy.sweep.store import SweepStore

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
    """The authors' simulator by hand: the prefill gives token 1; a step at token k commits min(acc[k - 1], B)."""
    generated, cycles, tau = 1, 0, 0
    while generated < len(lengths):
        step = min(lengths[generated - 1], block_size)
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
    (lambda rows: rows[2]["acc_eagle"]["acc_len"].__setitem__(5, -1), r"line 3 \(request r2\): acc_eagle.acc_len"),
    (lambda rows: rows[2]["acc_eagle"]["acc_len"].__setitem__(5, 0), "integers >= 1"),
    (lambda rows: rows[1]["acc_eagle"]["acc_len"].__setitem__(0, 2.5), "must be a list of integers"),
    (lambda rows: rows[0].pop("acc_eagle"), "line 1 has no 'acc_eagle' field"),
    (lambda rows: rows[0].pop("prompt_token_ids"), "no 'prompt_token_ids' field"),
    (lambda rows: rows[4].__setitem__("id", "r0"), r"repeats request ids \(\['r0'\]\)"),
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
    assert import_specdecode(file, tmp_path / "auto").store.candidates == tuple(range(1, 14))  # up to 12 drafts
    with pytest.raises(ValueError, match="unknown drafter 'mtp'; the traces record eagle, ngram"):
        import_specdecode(file, tmp_path / "store", drafter="mtp")
    with pytest.raises(FileNotFoundError, match="missing; pass a SpecDecode-Bench file"):
        import_specdecode(tmp_path / "nope.jsonl", tmp_path / "store")


def test_import_then_compare_and_train_from_the_command_line(trace, tmp_path):
    file, _ = trace
    store, costs = tmp_path / "store", "specpolicy/zoo/measured/cast-h100-sxm-llama-3.1-8b-context-1024.json"
    ngram = CliRunner().invoke(app, ["import-traces", str(file), "--out", str(store), "--drafter", "ngram",
                                     "--candidates", "1-16"])
    assert ngram.exit_code == 2 and "the longest accepted run is 2 drafts" in ngram.output
    covered = CliRunner().invoke(app, ["import-traces", str(file), "--out", str(tmp_path / "ngram"), "--drafter",
                                       "ngram"])  # by default, every block the recording covers
    assert covered.exit_code == 0 and "replay is exact for block sizes 1..3" in " ".join(covered.output.split())
    result = CliRunner().invoke(app, ["import-traces", str(file), "--out", str(store), "--candidates", "1-13"])
    assert result.exit_code == 0, result.output
    assert "imported 21 decodes" in result.output and "skipped request short" in result.output
    compare = CliRunner().invoke(app, ["compare", "--sweep", str(store), "--costs", costs, "--policies",
                                       "fixed4,fixed8,oracle,oracle-step,adaptive", "--format", "json"])
    assert compare.exit_code == 0, compare.output
    rows = {r["policy"]: r for r in json.loads(compare.stdout)}
    assert rows["oracle-step"]["speedup"] >= max(rows[p]["speedup"] for p in ("fixed4", "fixed8", "oracle")) > 0
    refused = CliRunner().invoke(app, ["train", "blockpilot", "--sweep", str(store), "--costs", costs, "--out",
                                       str(tmp_path / "bp")])
    assert refused.exit_code != 0 and "does not record (imported traces)" in refused.output


# Spec-Bench answers (evaluation/eval.py of hemingkx/Spec-Bench): per answer, choices[0] holds new_tokens per turn and
# accept_lengths per step over every turn, each the tokens that step committed (accepted drafts + 1)
def _answer(qid, category, turns_steps, **damage):
    steps = [a for turn in turns_steps for a in turn]
    choice = {"index": 0, "turns": ["..."] * len(turns_steps), "decoding_steps": [len(t) - 1 for t in turns_steps],
              "new_tokens": [sum(t) for t in turns_steps], "wall_time": [0.1] * len(turns_steps),
              "accept_lengths": steps} | damage
    return {"question_id": qid, "category": category, "answer_id": "x", "model_id": "m", "choices": [choice]}


@pytest.fixture
def answers(tmp_path):
    rows = [_answer(81, "writing", [[3, 1, 4, 2, 7], [1, 1, 5]]), _answer(91, "math_reasoning", [[2, 6, 1, 1]]),
            _answer(92, "rag", [[7] * 12 + [1]])]
    return _write(tmp_path / "eagle-answers.jsonl", rows), rows


def test_spec_bench_answers_replay_exactly_the_recorded_steps(answers, tmp_path):
    from specpolicy.registry import create_policy
    from specpolicy.sweep.importers import import_traces

    file, rows = answers
    result = import_traces(file, tmp_path / "store")
    assert result.requests == 4 and result.longest_drafts == 6 and "at B = 7 only" in result.exact_for
    store = SweepStore.load(tmp_path / "store")
    records = {r.prompt_id: r for r in store.records()}
    assert set(records) == {"eagle-answers:81", "eagle-answers:81:2", "eagle-answers:91", "eagle-answers:92"}
    assert store.candidates == (7,) and records["eagle-answers:92"].group == "rag"
    assert records["eagle-answers:81"].conversation == records["eagle-answers:81:2"].conversation
    steps = {"eagle-answers:81": [3, 1, 4, 2, 7], "eagle-answers:81:2": [1, 1, 5], "eagle-answers:91": [2, 6, 1, 1],
             "eagle-answers:92": [7] * 12 + [1]}
    for prompt_id, recorded in steps.items():
        cycles = records[prompt_id].table().simulate(7)
        assert [c.committed for c in cycles] == recorded and [c.accepted for c in cycles] == [a - 1 for a in recorded]
        assert records[prompt_id].taus[7] == pytest.approx(np.mean(recorded))
    pooled = sum(sum(s) for s in steps.values()) / sum(len(s) for s in steps.values())  # Spec-Bench's speed.py tau
    assert pooled == pytest.approx(np.mean([a for row in rows for a in row["choices"][0]["accept_lengths"]]))
    with pytest.raises(ValueError, match=r"missing \[8\]"):  # another block would visit other positions
        from specpolicy.evaluation.replay import check_policies

        check_policies([create_policy("fixed8", store.candidates)], store)


@pytest.mark.parametrize(("damage", "message"), [
    ({"accept_lengths": [3, 0, 4]}, "accept_lengths must be a list of integers >= 1"),
    ({"new_tokens": [5, 99]}, "do not split into its turns' new_tokens"),
    ({"accept_lengths": "3,1"}, "accept_lengths must be a list"),
])
def test_a_damaged_answer_is_refused_in_one_line(tmp_path, damage, message):
    from specpolicy.sweep.importers import import_traces

    file = _write(tmp_path / "a.jsonl", [_answer(1, "qa", [[2, 3]]), _answer(2, "qa", [[3, 1], [1, 4]], **damage)])
    with pytest.raises(ValueError, match=message):
        import_traces(file, tmp_path / "store")
    assert not (tmp_path / "store").exists()
    with pytest.raises(ValueError, match="pass --candidates 7"):
        import_traces(_write(tmp_path / "b.jsonl", [_answer(1, "qa", [[7, 1]])]), tmp_path / "s2", candidates=[4])
    with pytest.raises(ValueError, match="the one block size it drafted"):
        import_traces(_write(tmp_path / "c.jsonl", [_answer(1, "qa", [[7, 1]])]), tmp_path / "s3", candidates=[4, 8])


def test_a_policy_past_an_imported_recording_gets_a_hint_that_works(trace, tmp_path):
    """Seen on the real traces: the shipped `cycle` policy (blocks up to 32) on a recording of 1..13 was told to
    `specpolicy sweep --candidates ...`, which an imported store cannot do."""
    from specpolicy.evaluation.compare import compare_sweep

    file, _ = trace
    import_specdecode(file, tmp_path / "store", candidates=range(1, 14))
    with pytest.raises(ValueError, match=r"missing \[16, 20, 24, 32\]\); the imported recording covers no others") as e:
        compare_sweep(tmp_path / "store", ["fixed4", "cycle"])
    assert "specpolicy sweep" not in str(e.value)
