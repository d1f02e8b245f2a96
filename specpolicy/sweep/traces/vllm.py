"""vLLM responses from a server started with ``--per-request-spec-decode-metrics detailed``: per step, the
drafts accepted and drafted; the recorded decode replays exactly at B = K + 1. The import of every engine's
per-step records (:func:`import_steps`; SGLang's parser is sglang.py's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    metrics) and ``usage.completion_tokens`` (``None`` if not saved), cutting a last step past the output."""

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
    """Why ``completion_tokens`` cannot be these (accepted, drafted) steps' output (``None``: it can)."""
    output = 1 + sum(a + 1 for a, _ in steps)
    last = steps[-1][0] if steps else 0
    if tokens is None or (type(tokens) is int and output - last <= tokens <= output):
        return None
    if type(tokens) is not int or tokens < 1:
        return "completion_tokens must be an integer >= 1"
    return f"completion_tokens {tokens} contradicts the steps ({output - last}..{output} tokens)"


def import_steps(files: str | Path | Sequence[str | Path], out: str | Path, block_size: int | None = None,
                 dataset: str | None = None, parse: Callable[[Path, int, bytes], StepRequest] = vllm_response,
                 form: str = FORMAT) -> TraceImport:
    """Read responses with per-step records (JSONL; ``parse`` reads one, by default vLLM's: per step accepted
    and drafted, and K): exact at B = K + 1 only, steps that drafted fewer replayed as recorded and counted.
    Several files: runs at other blocks, a column each."""
    files = [common.trace_file(f, "a JSONL of engine responses with per-step speculative decoding stats")
             for f in ([files] if isinstance(files, str | Path) else files)]
    dataset, runs, first = dataset or files[0].stem, {}, []
    for file in files:
        responses = [parse(file, n, line) for n, line in common.jsonl_lines(file)]
        first = first or [r.id for r in responses]  # repeated ids kept: the store refuses them
        k = _run_k(file, responses, block_size, form)
        if k + 1 in runs:
            raise ValueError(f"{file}: a second run at B = {k + 1}; import one run of each block size")
        runs[k + 1] = {r.id: r for r in responses}
    sizes, ids = sorted(runs), list(dict.fromkeys(i for run in runs.values() for i in run))
    kept = [i for i in first if all(i in run and run[i].steps for run in runs.values())]
    skipped = {i: f"not in every run (B = {sizes})" if any(i not in r for r in runs.values()) else
               "no speculative decoding metrics (n > 1, or nothing drafted)" for i in ids if i not in kept}
    tokens = {i: {runs[b][i].tokens for b in sizes} - {None} for i in kept}
    for i in (i for i, t in tokens.items() if len(t) > 1):
        raise ValueError(f"request {i}: the runs output {sorted(tokens[i])} tokens, not one greedy decode; "
                         "import runs of the same prompts at temperature 0")
    meta = store_meta(files, dataset, form, sizes, training_block_size=sizes[-1],
                      **({"runs": sizes} if len(sizes) > 1 else {}))
    store = SweepStore.fill(out, meta, (
        per_step_record(index, f"{dataset}:{i}", {b: [a + 1 for a, _ in runs[b][i].steps] for b in sizes},
                        None, dataset, f"{dataset}:{i}", size=sizes[-1], tokens=next(iter(tokens[i]), None))
        for index, i in enumerate(kept)))
    steps = [(a, d, b - 1) for b in sizes for r in runs[b].values() for a, d in r.steps or ()]
    return TraceImport(store, len(kept), max((a for a, _, _ in steps), default=0), [], skipped,
                       f"the recorded decode at B = {', '.join(map(str, sizes))} only (per-step records; "
                       f"{sum(d < k for _, d, k in steps)} of {len(steps)} steps drafted fewer than "
                       f"{sizes[0] - 1 if len(sizes) == 1 else 'their run'} and replay as recorded)")


def _run_k(file: Path, responses: list[StepRequest], block_size: int | None, form: str) -> int:
    """The drafts K a run drafted a step (where no K is recorded: the widest step, or ``block_size`` - 1)."""
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
    return k
