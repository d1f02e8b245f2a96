"""Prompt sets: the truncated ShareGPT reader, splits, local files, hub names offline."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.data.prompts import Prompt, encode_prompt, with_own_answers
from specpolicy.data.registry import load_local, load_prompts
from specpolicy.data.sharegpt import iter_conversations, iter_records, split_of


def test_truncated_json_array_yields_only_complete_records(tmp_path):
    records = [{"id": f"c{i}_0", "conversations": [{"from": "human", "value": f"q{i} " * 50},
                                                   {"from": "gpt", "value": "a"}]} for i in range(50)]
    text = json.dumps(records, indent=2)
    cut = text[: text.index('"c37_0"') + 40]  # stop inside record 37
    path = tmp_path / "cut.json"
    path.write_text(cut)
    got = list(iter_records(path, chunk_chars=300))
    assert [r["id"] for r in got] == [f"c{i}_0" for i in range(37)]
    assert [c.turns[0][0] for c in iter_conversations(path)] == ["user"] * 37


def test_split_is_deterministic_and_by_conversation():
    assert split_of("abc") == split_of("abc")
    shares = [split_of(f"conv{i}") for i in range(4000)]
    assert 0.85 < shares.count("train") / 4000 < 0.95
    assert shares.count("heldout") > 100


def test_shipped_sharegpt_recovers_complete_records():
    assert sum(1 for _ in iter_records(__import__("specpolicy.data.sharegpt",
                                                  fromlist=["x"]).sharegpt_path())) == 17671


@pytest.mark.slow
def test_builtin_sets_and_seeded_sampling():
    humaneval = load_prompts("humaneval")
    assert len(humaneval) == 164 and "```python" in humaneval[0].messages[0][1]
    a = load_prompts("sharegpt", max_samples=5, seed=1)
    assert [p.id for p in a] == [p.id for p in load_prompts("sharegpt", max_samples=5, seed=1)]
    assert [p.id for p in a] != [p.id for p in load_prompts("sharegpt", max_samples=5, seed=2)]
    train_ids = {p.id for p in load_prompts("sharegpt-train")}
    assert not train_ids & {p.id for p in load_prompts("sharegpt")}


def test_local_jsonl_and_txt(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"id": "a", "prompt": "hi"}\n{"messages": [{"role": "user", "content": "yo"}]}\n')
    prompts = load_local(jsonl)
    assert prompts[0].id == "a" and prompts[1].messages == (("user", "yo"),)
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text('{"prompt": "hi", "category": "chat"}\n{"prompt": "yo", "category": "sql", "group": '
                        '"code"}\n')
    assert [(p.category, p.group) for p in load_local(labelled)] == [("chat", "chat"), ("sql", "code")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no prompt"}\n')
    with pytest.raises(ValueError, match="line 1 needs an object with a 'prompt' string"):
        load_local(bad)


@pytest.mark.parametrize(("lines", "message"), [
    ('{"prompt": "hi", "category": 3}', "'category' and 'group' must be strings"),
    ('{"prompt": null}', "its 'prompt' is not a non-empty string"),
    ('{"messages": [{"role": "user"}]}', "'messages' must be a non-empty list"),
    ('{"messages": "hello"}', "'messages' must be a non-empty list"),
    ('["hello"]', "line 1 is a JSON list"),
    ('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}', "line 2 repeats the id 'x' of line 1"),
])
def test_malformed_jsonl_lines_fail_naming_the_line(tmp_path, lines, message):
    """Each used to be swept silently wrong ("None", duplicates dropped) or end in a traceback."""
    path = tmp_path / "p.jsonl"
    path.write_text(lines + "\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        load_local(path)


def test_a_prompt_file_that_is_not_utf8_fails_clearly(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        load_local(path)


def test_hub_names_fail_at_once_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="hub is switched off.*use an offline set"):
        load_prompts("gsm8k")


def test_unknown_dataset_lists_known_names():
    with pytest.raises(ValueError, match="unknown dataset 'gsm9k'; known: sharegpt"):
        load_prompts("gsm9k")


def test_shipped_split_manifest_follows_the_rule():
    from specpolicy.zoo import ZOO_DIR

    manifest = json.loads((ZOO_DIR / "split.json").read_text())
    assert all(split_of(i) == "heldout" for i in manifest["heldout"])
    assert all(split_of(i) == "validation" for i in manifest["validation"])


def test_mt_bench_ships_offline():
    prompts = load_prompts("mt-bench")
    assert len(prompts) == 80 and len({p.id for p in prompts}) == 80
    assert prompts[0].id == "mt-bench:81:writing" and prompts[0].messages[0][0] == "user"
    categories = {p.id.split(":")[2] for p in prompts}
    assert len(categories) == 8 and "coding" in categories


def test_spec_bench_ships_offline_with_categories_groups_and_second_turns():
    prompts = load_prompts("spec-bench")
    questions = [p for p in prompts if p.id.count(":") == 1]
    assert len(questions) == 480 and len({p.id for p in prompts}) == len(prompts) == 560
    groups = Counter(p.group for p in questions)
    assert groups == {g: 80 for g in ("multi-turn", "translation", "summarization", "qa", "math", "rag")}
    second = next(p for p in prompts if p.id == "spec-bench:81:2")
    assert second.own_answers and second.category == "writing" and [r for r,
                                                                    _ in second.messages] == ["user"] * 2
    sample = load_prompts("spec-bench", max_samples=12, seed=0)
    assert Counter(p.group for p in sample) == {g: 2 for g in groups}  # a sample covers every group alike


def test_a_conversation_continues_after_the_targets_own_answers():
    prompt = Prompt("q:2", (("user", "first"), ("user", "second"), ("user", "third")), own_answers=True)
    asked = []

    def answer(conversation: Prompt) -> str:
        asked.append(conversation.messages)
        return f"answer {len(asked)}"

    filled = with_own_answers(prompt, answer)
    assert filled.messages == (("user", "first"), ("assistant", "answer 1"), ("user", "second"),
                               ("assistant", "answer 2"), ("user", "third"))
    assert asked[1] == (("user", "first"), ("assistant", "answer 1"), ("user", "second"))
    assert not filled.own_answers and with_own_answers(filled, answer) == filled
    with pytest.raises(ValueError, match="continues a conversation after the target's own answers"):
        encode_prompt(object(), prompt)


@given(st.text(), st.text())
def test_the_ascii_share_counts_characters_as_the_definition_does(first, second):
    """``is_mostly_ascii`` counts in C (ASCII bytes of the text) what the definition counts per character."""
    from specpolicy.data.sharegpt import Conversation, is_mostly_ascii

    conversation = Conversation("c_0", (("user", first), ("assistant", second)))
    text = first + second
    expected = bool(text) and sum(ch.isascii() for ch in text) / len(text) >= 0.97
    assert is_mostly_ascii(conversation) == expected
    assert is_mostly_ascii(Conversation("c_0", (("user", "ab\u00e9"),)), threshold=0.6)
    assert not is_mostly_ascii(Conversation("c_0", (("user", "a\ud800\u00e9"),)), threshold=0.5)
