"""Hub-backed prompt sets through ``datasets`` (online users), formatted as the DFlash evaluation does (a
step-by-step suffix for math, a test-passing request for code)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from specpolicy.data.prompts import Prompt

MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def code_request(problem: str) -> str:
    """The HumanEval-style wrapping of a code problem."""
    return (
        "Write a solution to the following problem and make sure that it passes the tests:\n"
        f"```python\n{problem}\n```"
    )


@dataclass(frozen=True)
class HubDataset:
    """Where a hub prompt set lives and how a row becomes a prompt."""

    repo: str
    split: str
    to_prompt: Callable[[int, dict], Prompt]
    config: str | None = None


def _single(name: str, build: Callable[[dict], str]) -> Callable[[int, dict], Prompt]:
    return lambda i, row: Prompt.single(f"{name}:{i}", build(row))


def _mt_bench(i: int, row: dict) -> Prompt:
    turns = row["prompt"] if isinstance(row["prompt"], list) else [row["prompt"]]
    return Prompt(f"mt-bench:{row.get('prompt_id', i)}", tuple(("user", t) for t in turns[:1]))


HUB_DATASETS: dict[str, HubDataset] = {
    "gsm8k": HubDataset("openai/gsm8k", "test", _single("gsm8k", lambda r: r["question"] + MATH_SUFFIX),
                        "main"),
    "math500": HubDataset("HuggingFaceH4/MATH-500", "test",
                          _single("math500", lambda r: r["problem"] + MATH_SUFFIX)),
    "aime24": HubDataset("HuggingFaceH4/aime_2024", "train",
                         _single("aime24", lambda r: r["problem"] + MATH_SUFFIX)),
    "humaneval-hub": HubDataset("openai/openai_humaneval", "test",
                                _single("humaneval", lambda r: code_request(r["prompt"]))),
    "mbpp": HubDataset("google-research-datasets/mbpp", "test",
                       _single("mbpp", lambda r: code_request(r["text"] + "\n" + "\n".join(r["test_list"]))),
                       "sanitized"),
    "swe-bench": HubDataset("princeton-nlp/SWE-bench_Lite", "test",
                            _single("swe-bench", lambda r: r["problem_statement"])),
    "mt-bench": HubDataset("HuggingFaceH4/mt_bench_prompts", "train", _mt_bench),
    "alpaca": HubDataset("tatsu-lab/alpaca", "train",
                         _single("alpaca", lambda r: (r["instruction"] + "\n\n" + r["input"]).strip())),
    "wsc": HubDataset("super_glue", "validation", _single("wsc", lambda r: r["text"]), "wsc.fixed"),
    "copa": HubDataset("super_glue", "validation", _single("copa", lambda r: r["premise"]), "copa"),
}


def load_hub_prompts(name: str) -> list[Prompt]:
    """Prompts of a hub-backed set; fails at once, with what to do, when that cannot work."""
    spec = HUB_DATASETS[name]
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise RuntimeError(
            f"dataset {name!r} lives on the Hugging Face hub ({spec.repo}) and the hub is switched off "
            "(HF_HUB_OFFLINE/HF_DATASETS_OFFLINE=1); use an offline set (sharegpt, humaneval) or a local "
            "JSONL/TXT file instead"
        )
    try:
        import datasets
    except ImportError:
        raise RuntimeError(
            f"dataset {name!r} is hub-backed and needs the `datasets` package: pip install "
            "'specpolicy[hub]', or use an offline set (sharegpt, humaneval) or a local JSONL/TXT file"
        ) from None
    try:
        rows = datasets.load_dataset(spec.repo, spec.config, split=spec.split)
    except Exception as exc:  # network, auth or a moved dataset
        raise RuntimeError(
            f"could not load {name!r} from the hub ({spec.repo}): {exc}. Offline? Use sharegpt, humaneval "
            "or a local JSONL/TXT file"
        ) from exc
    return [spec.to_prompt(i, row) for i, row in enumerate(rows)]
