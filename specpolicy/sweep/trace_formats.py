"""Reading the trace formats :mod:`specpolicy.sweep.traces` imports, one checked record at a time (a ValueError naming
the file, line and problem otherwise), and the replay records a chain trace or a per-step record becomes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specpolicy.defaults import MAX_BLOCK_SIZE, MAX_RECORDED_RUN
from specpolicy.sweep.records import RECORD_VERSION, ReplayEntry, SweepRecord, prompt_digest


def specdecode_request(file: Path, line_number: int, line: bytes, drafter: str
                       ) -> tuple[str, list[int], list[int], list[int]]:
    """(id, prompt ids, generated ids, acceptance lengths) of one line; a ValueError naming the line otherwise."""
    body, where = json_line(file, line_number, line)
    try:
        request = str(body["id"])
        prompt, tokens = body["prompt_token_ids"], body.get("generated_token_ids", [])
        lengths = body[f"acc_{drafter}"]["acc_len"]
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a SpecDecode-Bench trace with acc_{drafter}.acc_len "
                         "(docs: importing traces)") from None
    for name, values, least, most in (("prompt_token_ids", prompt, 0, None), ("generated_token_ids", tokens, 0, None),
                                      (f"acc_{drafter}.acc_len", lengths, 1, MAX_RECORDED_RUN)):
        if not counts(values, least, most):
            why = (f" and <= {most:,} (tokens committed per draft: its accepted drafts + the target's own)"
                   if most else "")
            raise ValueError(f"{where} (request {request}): {name} must be a list of integers >= {least}{why}")
    return request, prompt, tokens, lengths


def spec_bench_answer(file: Path, line_number: int, line: bytes) -> tuple[str, str | None, list[list[int]]]:
    """(question id, category, the committed tokens of every step, per turn) of one answer; a ValueError naming the
    line otherwise. Steps split into turns by ``new_tokens`` (a turn's steps commit exactly its new tokens)."""
    body, where = json_line(file, line_number, line)
    try:
        question, choice = str(body["question_id"]), body["choices"][0]
        steps, per_turn = choice["accept_lengths"], choice["new_tokens"]
    except (KeyError, TypeError, IndexError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a Spec-Bench answer with choices[0].accept_lengths "
                         "and new_tokens (docs: importing traces)") from None
    for name, values, least in (("accept_lengths", steps, 1), ("new_tokens", per_turn, 0)):
        if not counts(values, least):
            raise ValueError(f"{where} (question {question}): {name} must be a list of integers >= {least}")
    turns, start = [], 0
    for tokens in per_turn:
        end, total = start, 0
        while total < tokens and end < len(steps):
            total, end = total + steps[end], end + 1
        if total != tokens:
            break
        turns.append(steps[start:end])
        start = end
    if start != len(steps) or len(turns) != len(per_turn):
        raise ValueError(f"{where} (question {question}): its accept_lengths ({sum(steps)} tokens in {len(steps)} "
                         f"steps) do not split into its turns' new_tokens {per_turn}; the answer is damaged")
    return question, body.get("category"), turns


@dataclass(frozen=True)
class VllmRequest:
    """One vLLM response's record: K (0 without metrics), (accepted, drafted) per step (``None`` without metrics)
    and ``usage.completion_tokens`` (``None`` if not saved), which cuts a last step that ran past the output."""

    id: str
    k: int
    steps: list[tuple[int, int]] | None
    tokens: int | None = None


def vllm_response(file: Path, line_number: int, line: bytes) -> VllmRequest:
    """One response's :class:`VllmRequest`; a ValueError naming the line and the problem otherwise."""
    body, where = json_line(file, line_number, line)
    try:
        request, metrics = str(body["id"]), body["metrics"]["speculative_decoding"]
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a vLLM response with metrics.speculative_decoding "
                         "(start the server with --per-request-spec-decode-metrics detailed)") from None
    if metrics is None:
        return VllmRequest(request, 0, None)
    where = f"{where} (request {request})"
    if not isinstance(metrics, dict) or "per_step_accepted" not in metrics:
        raise ValueError(f"{where} has summary metrics only, no per_step_accepted; start the server with "
                         "--per-request-spec-decode-metrics detailed")
    accepted, drafted, k = metrics["per_step_accepted"], metrics.get("per_step_drafted"), metrics.get("num_spec_tokens")
    problem = (f"num_spec_tokens must be an integer in 1..{MAX_BLOCK_SIZE - 1}"
               if not (type(k) is int and 1 <= k < MAX_BLOCK_SIZE) else
               "per_step_accepted and per_step_drafted must be lists of integers >= 0"
               if not (counts(accepted, 0) and counts(drafted, 0)) else
               "per_step_accepted and per_step_drafted differ in length" if len(accepted) != len(drafted) else
               "a step accepted more than it drafted, or drafted more than num_spec_tokens"
               if any(not a <= d <= k for a, d in zip(accepted, drafted)) else
               "num_spec_steps is not the number of steps recorded"
               if metrics.get("num_spec_steps", len(accepted)) != len(accepted) else
               "per_step_accepted does not add up to num_accepted_draft_tokens"
               if metrics.get("num_accepted_draft_tokens", sum(accepted)) != sum(accepted) else None)
    tokens = (body.get("usage") or {}).get("completion_tokens")
    if problem or not (tokens is None or (type(tokens) is int and tokens >= 1)):
        raise ValueError(f"{where}: {problem or 'usage.completion_tokens must be an integer >= 1'}; the response is "
                         "damaged")
    return VllmRequest(request, k, list(zip(accepted, drafted)), tokens)


def read_profile(file: Path) -> tuple[dict, int, np.ndarray]:
    """(the profile, K, its conditional acceptance rates [K]); a ValueError naming the problem otherwise."""
    try:
        profile = json.loads(file.read_text(encoding="utf-8"))
        k, rates = profile["num_speculative_tokens"], profile["conditional_accept_rates"]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{file} is not JSON; pass a speculation_profile.json") from None
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{file} has no {missing} field: not a speculation_profile.json") from None
    problems = [(profile.get("measured") is False, "is an unmeasured stub (measured: false); measure the drafter "
                 "first (Model-Optimizer's specdec_bench writes the profile)"),
                (profile.get("verification_method", "longest_prefix") != "longest_prefix",
                 f"was measured with verification_method {profile.get('verification_method')!r}, not a longest "
                 "accepted prefix, which replay needs"),
                (not (type(k) is int and 1 <= k < MAX_BLOCK_SIZE), f"num_speculative_tokens must be an integer in "
                 f"1..{MAX_BLOCK_SIZE - 1}"),
                (not (isinstance(rates, list) and len(rates) == k and all(isinstance(r, int | float) and 0 <= r <= 1
                                                                          for r in rates)),
                 "conditional_accept_rates must hold num_speculative_tokens rates in [0, 1]")]
    for failed, problem in problems:
        if failed:
            raise ValueError(f"{file} {problem}")
    return profile, k, np.asarray(rates, dtype=float)


def chain_record(prompt_id: str, index: int, drafts: list[int], sizes: Sequence[int], prompt: list[int],
                  category: str) -> SweepRecord:
    """A chain drafter's decode whose draft at position i would have ``drafts[i]`` drafts accepted."""
    entry = ReplayEntry(candidates=tuple(sizes), accepted=[[min(a, sizes[-1] - 1)] for a in drafts], sequence=[],
                        output_length=len(drafts), stop_token_ids=(), budget=len(drafts), chain=True)
    return SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index, prompt_length=len(prompt),
                       prompt_sha256=prompt_digest(prompt), taus=entry.table(len(prompt)).taus(),
                       output_length=len(drafts), replay=entry, category=category)


def per_step_record(index: int, prompt_id: str, lengths: list[int], category: str | None, group: str,
                     conversation: str, size: int, tokens: int | None = None) -> SweepRecord:
    """A decode whose steps committed ``lengths`` tokens: the prefill's token, then a step at every anchor the
    recorded run reached (accepted drafts there; -1, unreached, elsewhere), at the one block size ``size``; an
    output of ``tokens`` (fewer than the steps committed: the engine cut the last step) ends the replay there."""
    accepted, anchor = [-1] * (1 + sum(lengths)), 0
    for committed in lengths:
        accepted[anchor], anchor = committed - 1, anchor + committed
    entry = ReplayEntry(candidates=(size,), accepted=[[a] for a in accepted], sequence=[], output_length=len(accepted),
                        stop_token_ids=(), budget=min(tokens or len(accepted), len(accepted)), chain=True)
    return SweepRecord(version=RECORD_VERSION, prompt_id=prompt_id, index=index, prompt_sha256=prompt_digest([]),
                       taus=entry.table(0).taus(), output_length=len(accepted), replay=entry, category=category,
                       group=group, conversation=conversation, training_block_size=size)


def json_line(file: Path, line_number: int, line: bytes) -> tuple[dict, str]:
    """One JSONL line's object and where it is; a ValueError naming a damaged line."""
    where = f"{file}, line {line_number}"
    try:
        body = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{where} is not JSON; the file is damaged (fetch or write it again)") from None
    if not isinstance(body, dict):
        raise ValueError(f"{where} holds a JSON {type(body).__name__}, not an object; the file is damaged")
    return body, where


def jsonl_lines(file: Path) -> list[tuple[int, bytes]]:
    """(line number, line) of every non-blank line of a JSONL file (read whole, the file closed)."""
    return [(n, line) for n, line in enumerate(file.read_bytes().splitlines(), 1) if line.strip()]


def counts(values: object, least: int, most: int | None = None) -> bool:
    """Whether ``values`` is a list of integers in ``least``..``most`` (no upper bound without ``most``)."""
    return isinstance(values, list) and all(type(v) is int and least <= v <= (most or v) for v in values)


def first_object(file: Path) -> dict:
    """The first JSON object of a JSONL file, or the whole file's (a pretty-printed profile); {} if neither."""
    with file.open("rb") as lines:
        first = next((line for line in lines if line.strip()), b"")
    for text in (first, file.read_bytes()):
        try:
            body = json.loads(text)
            return body if isinstance(body, dict) else {}
        except (UnicodeDecodeError, ValueError):
            continue
    return {}


def trace_file(file: str | Path, example: str) -> Path:
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is {'a folder' if file.exists() else 'missing'}; pass {example} "
                                "(docs: importing traces)")
    return file
