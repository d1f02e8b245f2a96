"""Sweeps over the test zoo: records, resumption after an interruption, live vs replay."""

from __future__ import annotations

import pytest

from specpolicy.data.registry import load_prompts
from specpolicy.sweep.run import run_sweep
from specpolicy.sweep.settings import SweepSettings
from specpolicy.sweep.store import SweepStore


def test_replay_store_holds_every_prompt(replay_store):
    records = list(replay_store.records())
    assert len(records) == 8
    meta = replay_store.meta
    for key in ("candidates", "temperature", "max_new_tokens", "seed", "models", "created"):
        assert key in meta
    assert meta["models"]["dtype"] == "float32" and meta["models"]["device"] == "cpu"
    sizes = set(replay_store.candidates)
    for record in records:
        assert set(record.taus) == sizes and 1 in sizes and record.version == 2
        assert replay_store.features(record).shape == (300,)
    costs = replay_store.latency()
    assert set(costs.verify_seconds) == set(replay_store.candidates)
    assert costs.threads == 1 and costs.ar_seconds > 0 and costs.machine


def test_interrupted_sweep_resumes_without_loss_or_duplicates(test_zoo, prompt_file, tmp_path):
    target, drafter = test_zoo
    settings = SweepSettings(dataset=str(prompt_file), max_new_tokens=12, max_samples=None,
                             target=str(target),
                             drafter=str(drafter), candidates=[4, 8])
    prompts = load_prompts(str(prompt_file))

    def interrupt(done, total):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(settings, str(tmp_path / "s"), prompts, on_progress=interrupt)
    assert len(SweepStore.load(tmp_path / "s").done_ids()) == 3
    store = run_sweep(settings, str(tmp_path / "s"), prompts)
    ids = [r.prompt_id for r in store.records()]
    assert sorted(ids) == sorted(p.id for p in prompts) and len(ids) == len(set(ids))


# decodes every candidate live; tests/sweep/test_replay.py keeps replay = live in the fast tier
@pytest.mark.slow
def test_live_sweep_agrees_with_replay_taus(test_zoo, prompt_file, tmp_path):
    target, drafter = test_zoo
    prompts = load_prompts(str(prompt_file))[:3]
    common = dict(dataset=str(prompt_file), max_new_tokens=16, max_samples=None, target=str(target),
                  drafter=str(drafter), candidates=[2, 6])
    live = run_sweep(SweepSettings(mode="live", **common), str(tmp_path / "live"), prompts)
    replay = run_sweep(SweepSettings(mode="replay", **common), str(tmp_path / "replay"), prompts)
    for a, b in zip(live.records(), replay.records()):
        assert a.taus == pytest.approx(b.taus)
        assert 1 in a.live


@pytest.mark.parametrize(("settings", "message"), [
    ({"mode": "fast"}, "unknown sweep mode"),
    ({"candidates": [4, 4]}, "repeat"),
    # from Python these were accepted (the command's options refuse them)
    ({"max_new_tokens": 2.5}, "max_new_tokens must be an integer >= 2"),
    ({"max_prompt_tokens": 0}, "max_prompt_tokens must be an integer >= 1"),
    ({"threads": 0}, "threads must be an integer >= 1"),
    ({"max_samples": -3}, "max_samples must be an integer >= 1"),
    ({"seed": "x"}, "seed must be an integer >= 0"),
    ({"reference_block_size": 0}, "block size must be an integer in 1..64"),
    ({"confidence_sizes": [4, 4]}, "confidence_sizes must name distinct block sizes"),
    ({"confidence_sizes": "4,8"}, "confidence_sizes must be a list of block sizes"),
])
def test_bad_settings_fail_before_any_model_loads(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        run_sweep(SweepSettings(**settings), str(tmp_path / "s"), [])


def _jsonl(path, texts):
    path.write_text("".join(f'{{"id": "q{i}", "prompt": "{t}"}}\n' for i, t in enumerate(texts)))
    return path


def test_resuming_with_a_larger_sample_keeps_every_record_on_its_own_features(test_zoo, tmp_path):
    """Features were keyed by list position: a resume that reordered the prompts overwrote finished ones."""
    target, drafter = test_zoo
    data = _jsonl(tmp_path / "p.jsonl", ["one fish", "two fish", "red fish", "blue fish", "old fish"])
    common = dict(dataset=str(data), max_new_tokens=6, target=str(target), drafter=str(drafter),
                  candidates=[2, 4])
    run_sweep(SweepSettings(max_samples=2, **common), str(tmp_path / "s"), load_prompts(str(data), 2))
    store = run_sweep(SweepSettings(max_samples=5, **common), str(tmp_path / "s"), load_prompts(str(data), 5))
    records = list(store.records())
    assert len(records) == 5 and len({r.features for r in records}) == 5
    features = [store.features(r) for r in records]  # every file still matches its record's checksum
    assert len({tuple(f.tolist()) for f in features}) == 5


def test_a_rewritten_prompt_file_is_not_resumed_as_the_old_one(test_zoo, tmp_path):
    target, drafter = test_zoo
    data = _jsonl(tmp_path / "p.jsonl", ["one fish", "two fish"])
    common = dict(dataset=str(data), max_new_tokens=6, target=str(target), drafter=str(drafter),
                  candidates=[2, 4],
                  max_samples=None)
    run_sweep(SweepSettings(**common), str(tmp_path / "s"), load_prompts(str(data)))
    _jsonl(data, ["red fish", "blue fish"])  # same ids, other prompts
    with pytest.raises(ValueError, match="dataset_sha256: stored"):
        run_sweep(SweepSettings(**common), str(tmp_path / "s"), load_prompts(str(data)))


def test_duplicate_prompt_ids_fail_before_any_model_loads(tmp_path):
    from specpolicy.data.prompts import Prompt

    prompts = [Prompt.single("a", "x"), Prompt.single("a", "y")]
    with pytest.raises(ValueError, match="prompt id 'a' appears twice"):
        run_sweep(SweepSettings(target="no/such-model"), str(tmp_path / "s"), prompts)


def test_resume_refuses_a_prompt_whose_text_changed_naming_it(test_zoo, prompt_file, tmp_path):
    """Resume skipped prompts by id only, so an edited prompt kept its old record (prompt_sha256 went
    unread)."""
    from specpolicy.data.prompts import Prompt

    target, drafter = test_zoo
    settings = SweepSettings(dataset=str(prompt_file), max_new_tokens=8, max_samples=None, target=str(target),
                             drafter=str(drafter), candidates=[4])
    prompts = load_prompts(str(prompt_file))[:3]
    run_sweep(settings, str(tmp_path / "s"), prompts)
    edited = [prompts[0], Prompt.single(prompts[1].id, "an entirely different question?"), prompts[2]]
    with pytest.raises(ValueError, match=rf"{prompts[1].id!r}.*changed since it was swept"):
        run_sweep(settings, str(tmp_path / "s"), edited)
    assert len(SweepStore.load(tmp_path / "s").done_ids()) == 3


def test_a_second_turn_is_swept_after_the_targets_own_first_answer(test_zoo, tmp_path):
    """Spec-Bench's multi-turn questions: the second turn's prompt holds the target's first answer."""
    target, drafter = test_zoo
    prompts = [p for p in load_prompts("spec-bench") if p.id in ("spec-bench:81", "spec-bench:81:2")]
    settings = SweepSettings(dataset="spec-bench", candidates=[1, 4, 16], max_new_tokens=8, max_samples=None,
                             target=str(target), drafter=str(drafter))
    store = run_sweep(settings, str(tmp_path / "s"), prompts)
    first, second = sorted(store.records(), key=lambda r: r.prompt_id)
    assert (first.category, first.group, second.category, second.group) == ("writing", "multi-turn") * 2
    assert second.prompt_length > first.prompt_length + first.output_length  # turn 1, its answer, turn 2
    resumed = run_sweep(settings, str(tmp_path / "s"), prompts)  # the same answer again: nothing is stale
    assert [r.prompt_sha256 for r in resumed.records()] == [r.prompt_sha256 for r in store.records()]


@pytest.mark.slow  # sweeps with the test pair
def test_a_prompt_that_would_decode_up_to_the_context_limit_is_swept_from_its_last_tokens(test_zoo, tmp_path):
    """Reported: a prompt whose decode reached the target's context stopped the sweep for good, with a wrong
    size in the message (the prompt plus its output), and every resume failed alike. The sweep now keeps the
    prompt's last tokens that leave room for the output and the largest block."""
    target, drafter = test_zoo
    data = tmp_path / "long.jsonl"
    data.write_text('{"id": "long", "prompt": "' + "tell me more about the sea " * 200 + '"}\n'
                    '{"id": "short", "prompt": "Say hello."}\n')
    settings = SweepSettings(dataset=str(data), candidates=[1, 4, 16], max_new_tokens=64,
                             max_prompt_tokens=4000,
                             max_samples=None, target=str(target), drafter=str(drafter))
    store = run_sweep(settings, str(tmp_path / "s"), load_prompts(str(data)))
    lengths = {r.prompt_id: r.prompt_length + (r.output_length or 0) for r in store.records()}
    assert set(lengths) == {"long", "short"} and lengths["long"] <= 512 - 16
    with pytest.raises(ValueError, match="leave no room for a prompt"):
        SweepSettings(max_new_tokens=600).prompt_tokens(512)
