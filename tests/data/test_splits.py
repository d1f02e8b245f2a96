"""The one split rule (reported: 14 held-out prompts' texts also appeared in training, validation shared 11
conversations with training, and the held-out sweep held "Please continue" 10 times)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpolicy.data.prompts import Prompt
from specpolicy.data.splits import SplitKey, distinct, normalise_text, text_key, validation_ids
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR

SWEEPS = ZOO_DIR / "sweeps"


@pytest.mark.parametrize(("a", "b", "same"), [
    ("Please continue", "please  continue.", True),
    ("hi", "Hi!", True),
    ("ＡＢＣ", "abc", True),  # full-width letters (NFKC)
    ("continue", "please continue", False),
    ("def f(x):", "def f(x)", False),  # only end punctuation . ! ? is dropped
])
def test_inputs_match_after_normalising(a, b, same):
    assert (normalise_text(a) == normalise_text(b)) is same
    assert (text_key([("user", a)]) == text_key([("user", b)])) is same


def test_distinct_keeps_the_first_of_each_input_and_none_seen_elsewhere():
    texts = ["hi", "Please continue", "HI", "why", "please continue"]
    prompts = [Prompt.single(f"p{i}", t) for i, t in enumerate(texts)]
    assert [p.id for p in distinct(prompts)] == ["p0", "p1", "p3"]
    assert [p.id for p in distinct(prompts, seen={text_key([("user", "why")])})] == ["p0", "p1"]


def _sides(keys: list[SplitKey], share: float) -> dict[str, bool]:
    held = validation_ids(keys, share)
    return {k.prompt_id: k.prompt_id in held for k in keys}


def test_a_conversation_and_an_input_each_stay_on_one_side():
    # a chains to b by conversation, b to c by input: all three land together whatever the share
    keys = [SplitKey("a", "chat1", "t1"), SplitKey("b", "chat1", "t2"), SplitKey("c", "chat2", "t2"),
            SplitKey("d", "chat3", "t3")]
    for share in (0.0, 0.3, 0.5, 0.7, 1.0):
        sides = _sides(keys, share)
        assert sides["a"] == sides["b"] == sides["c"]
    assert validation_ids(keys, 0.0) == set() and validation_ids(keys, 1.0) == {"a", "b", "c", "d"}


def test_a_prompt_alone_is_split_by_its_conversation_key_as_before():
    """Unlinked prompts keep the store's earlier rule (a hash of the id), so users' stores split as they
    did."""
    keys = [SplitKey(f"p{i}", f"p{i}", f"t{i}") for i in range(200)]
    held = validation_ids(keys, 0.2, seed=3)
    assert 20 < len(held) < 60  # about a fifth
    assert validation_ids(list(reversed(keys)), 0.2, seed=3) == held  # order does not matter


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=30),
       st.floats(0, 1), st.integers(0, 3))
def test_no_conversation_or_input_straddles_the_sides(pairs, share, seed):
    keys = [SplitKey(f"p{i}", f"c{c}", f"t{t}") for i, (c, t) in enumerate(pairs)]
    held = validation_ids(keys, share, seed)
    for field in ("conversation", "text"):
        sides: dict[str, set[bool]] = {}
        for key in keys:
            sides.setdefault(getattr(key, field), set()).add(key.prompt_id in held)
        assert all(len(s) == 1 for s in sides.values()), field


def _records(name: str, split: str | None = None) -> list:
    return list(SweepStore.load(SWEEPS / name, split=split).records())


def test_the_shipped_splits_share_no_input_or_conversation():
    """The held-out sweeps against both sides of the training sweep, and those sides against each other."""
    train, validation = _records("sharegpt-train", "train"), _records("sharegpt-train", "validation")
    assert len(validation) > 50
    sides = {"train": train, "validation": validation, "heldout": _records("sharegpt"),
             "heldout-verify": _records("sharegpt-verify")}
    for records in sides.values():
        assert all(r.conversation and r.text_key for r in records)
        assert not [k for k, n in Counter(r.text_key for r in records).items() if n > 1]  # each input once
    for a, b in (("train", "validation"), ("train", "heldout"), ("validation", "heldout"),
                 ("train", "heldout-verify"), ("validation", "heldout-verify")):
        for field in ("conversation", "text_key"):
            shared = {getattr(r, field) for r in sides[a]} & {getattr(r, field) for r in sides[b]}
            assert not shared, (a, b, field, sorted(shared)[:3])


def test_the_held_out_sweeps_hold_the_same_prompts():
    ids = [[json.loads(line)["prompt_id"] for line in (SWEEPS / name / "records.jsonl").open()]
           for name in ("sharegpt", "sharegpt-verify")]
    assert ids[0] == ids[1]


@pytest.mark.slow  # reads the whole ShareGPT file (about 8 s)
def test_a_held_out_sample_repeats_no_input_of_the_training_splits():
    from specpolicy.data.builtin import sharegpt_seen
    from specpolicy.data.registry import load_prompts

    held = load_prompts("sharegpt", 200)
    keys = [text_key(p.messages) for p in held]
    assert len(held) == 200 and len(set(keys)) == 200
    assert not set(keys) & sharegpt_seen("heldout")
    # the shipped sweep is this sample
    assert [r.prompt_id for r in _records("sharegpt")] == [p.id for p in held]
    train = load_prompts("sharegpt-train", 480)
    assert [r.prompt_id for r in _records("sharegpt-train")] == [p.id for p in train]
