"""vLLM responses from a server started with ``--per-request-spec-decode-metrics detailed``: per step, the
drafts accepted and drafted; the recorded decode replays exactly at B = K + 1. The import of every engine's
per-step records (:func:`import_steps`; SGLang's parser is sglang.py's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import common
from specpolicy.sweep.traces.common import TraceImport, per_step_record, store_meta

FORMAT = "vllm-per-request"
DETAILED = "--per-request-spec-decode-metrics detailed (per choice: --per-request-spec-decode-stats detailed)"


@dataclass(frozen=True)
class StepRequest:
    """One response's per-step record: K (0 without metrics), (accepted, drafted) per step (``None`` without
    metrics) and ``usage.completion_tokens`` (``None`` if not saved), which cuts a last step that ran past the
    output."""

    id: str
    k: int
    steps: list[tuple[int, int]] | None
    tokens: int | None = None


def vllm_response(file: Path, line_number: int, line: bytes) -> StepRequest:
    """One response's :class:`StepRequest` (``metrics.speculative_decoding``, or the same fields per choice,
    ``choices[0].speculative_decoding_stats``: the first choice's); a ValueError naming the line otherwise."""
    body, where = common.json_line(file, line_number, line)
    choice = next(iter(body.get("choices") or [{}]), {})
    try:
        request = common.request_id(body, "id", where)
        metrics = choice["speculative_decoding_stats"] if isinstance(choice, dict) and \
            "speculative_decoding_stats" in choice else body["metrics"]["speculative_decoding"]
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a vLLM response with "
                         "metrics.speculative_decoding or choices[0].speculative_decoding_stats (start the "
                         f"server with {DETAILED})") from None
    if metrics is None:
        return StepRequest(request, 0, None)
    where = f"{where} (request {request})"
    if not isinstance(metrics, dict) or "per_step_accepted" not in metrics:
        raise ValueError(f"{where} has summary metrics only, no per_step_accepted; start the server with "
                         f"{DETAILED}")
    accepted, drafted = metrics["per_step_accepted"], metrics.get("per_step_drafted")
    k = metrics.get("num_spec_tokens")
    problem = (f"num_spec_tokens must be an integer in 1..{MAX_BLOCK_SIZE - 1}"
               if not (type(k) is int and 1 <= k < MAX_BLOCK_SIZE) else
               "per_step_accepted and per_step_drafted must be lists of integers >= 0"
               if not (common.counts(accepted, 0) and common.counts(drafted, 0)) else
               "per_step_accepted and per_step_drafted differ in length" if len(accepted) != len(drafted) else
               "a step accepted more than it drafted, or drafted more than num_spec_tokens"
               if any(not a <= d <= k for a, d in zip(accepted, drafted)) else
               "num_spec_steps is not the number of steps recorded"
               if metrics.get("num_spec_steps", len(accepted)) != len(accepted) else
               "per_step_accepted does not add up to num_accepted_draft_tokens"
               if metrics.get("num_accepted_draft_tokens", sum(accepted)) != sum(accepted) else None)
    tokens = (body.get("usage") or {}).get("completion_tokens")
    problem = problem or contradiction(list(zip(accepted, drafted)), tokens)
    if problem:
        raise ValueError(f"{where}: {problem}; the response is damaged")
    return StepRequest(request, k, list(zip(accepted, drafted)), tokens)


def contradiction(steps: list[tuple[int, int]], tokens: object) -> str | None:
    """Why ``completion_tokens`` cannot be the output of these (accepted, drafted) steps (``None``: it can, or
    was not saved): the prefill's token, then each step's accepted drafts + 1, the last cut at most."""
    output = 1 + sum(a + 1 for a, _ in steps)
    last = steps[-1][0] if steps else 0
    if tokens is None or (type(tokens) is int and output - last <= tokens <= output):
        return None
    if type(tokens) is not int or tokens < 1:
        return "completion_tokens must be an integer >= 1"
    return f"completion_tokens {tokens} contradicts the steps ({output - last}..{output} tokens)"


def import_steps(file: str | Path, out: str | Path, block_size: int | None = None, dataset: str | None = None,
                 parse: Callable[[Path, int, bytes], StepRequest] = vllm_response, form: str = FORMAT
                 ) -> TraceImport:
    """Read responses with per-step records (JSONL; ``parse`` reads one, vLLM's by default: from a server
    started with ``--per-request-spec-decode-metrics detailed``, ``metrics.speculative_decoding`` holds
    ``per_step_accepted`` / ``per_step_drafted`` per step and ``num_spec_tokens`` K). As Spec-Bench answers,
    the recorded decode replays exactly at B = K + 1 only; steps that drafted fewer than K (an n-gram lookup
    without a match, dynamic SD, a verify-length rule) replay as recorded and are counted."""
    file = common.trace_file(file, "a JSONL of engine responses with per-step speculative decoding stats")
    dataset = dataset or file.stem
    responses = [parse(file, n, line) for n, line in common.jsonl_lines(file)]
    drafts = {r.k for r in responses if r.k}
    if form != FORMAT and drafts:  # a K not recorded: the widest step verified, or the block given
        drafts = {max(*drafts, (block_size or 1) - 1)}
    if len(drafts) != 1:
        raise ValueError(f"{file}: " + (f"runs of num_spec_tokens {sorted(drafts)} are mixed; import one run "
                                        "a file"
                                        if drafts else "no response carries speculative decoding metrics"))
    k = drafts.pop()
    if block_size not in (None, k + 1):
        raise ValueError(f"{file}: the run drafted {k} tokens a step, a block of {k + 1}; pass "
                         f"--candidates {k + 1} or leave it out")
    skipped = {r.id: "no speculative decoding metrics (n > 1, or nothing drafted)" for r in responses
               if not r.steps}
    store = SweepStore.fill(out, store_meta(file, dataset, form, [k + 1], training_block_size=k + 1), (
        per_step_record(index, f"{dataset}:{r.id}", [a + 1 for a, _ in r.steps], None, dataset,
                        f"{dataset}:{r.id}",
                        size=k + 1, tokens=r.tokens) for index, r in enumerate(responses) if r.steps))
    steps = [step for r in responses for step in r.steps or ()]
    return TraceImport(store, len(responses) - len(skipped), max((a for a, _ in steps), default=0), [],
                       skipped,
                       f"the recorded decode at B = {k + 1} only (per-step records; "
                       f"{sum(d < k for _, d in steps)} of {len(steps)} steps drafted fewer than {k} and "
                       "replay as recorded)")
