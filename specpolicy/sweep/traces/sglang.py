"""SGLang responses with ``--speculative-decoding-stats detailed`` (sgl-project/sglang #34814 @622d048d):
native ``meta_info.speculative_decoding_stats`` or OpenAI ``sglext.speculative_decoding_stats`` (the first's):
``verify_lengths`` (root + drafts verified) and ``accept_lengths`` (accepted + bonus) per step, raw (a stop
trims the output, not them); imported as vLLM's per-step records are (:func:`vllm.import_steps`)."""

from __future__ import annotations

from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.sweep.traces import common
from specpolicy.sweep.traces.vllm import StepRequest, contradiction

FORMAT = "sglang-per-request"
DETAILED = "start the server with --speculative-decoding-stats detailed"
STATS = "speculative_decoding_stats"


def sglang_response(file: Path, line_number: int, line: bytes) -> StepRequest:
    """One response's :class:`StepRequest` (K: its widest step); a ValueError naming the line otherwise."""
    body, where = common.json_line(file, line_number, line)
    meta = body.get("meta_info")
    native = isinstance(meta, dict)
    try:
        request = common.request_id(meta if native else body, "id", where)
        stats = meta[STATS] if native else (body["sglext"][STATS] or [None])[0]
    except (KeyError, TypeError, IndexError) as missing:
        raise ValueError(f"{where} has no {missing} field: not an SGLang response with speculative decoding "
                         f"stats ({DETAILED})") from None
    where = f"{where} (request {request})"
    if stats is None:
        return StepRequest(request, 0, None)
    verify, accept = (stats.get(name) if isinstance(stats, dict) else None
                      for name in ("verify_lengths", "accept_lengths"))
    if verify is None and accept is None:
        raise ValueError(f"{where} has summary stats only, no verify_lengths; {DETAILED}")
    sums = (stats.get("num_verified_draft_tokens"), stats.get("num_accepted_draft_tokens"))
    problem = ("verify_lengths and accept_lengths must be lists of integers in 1.." + str(MAX_BLOCK_SIZE)
               if not (common.counts(verify, 1, MAX_BLOCK_SIZE) and common.counts(accept, 1, MAX_BLOCK_SIZE))
               else "verify_lengths and accept_lengths differ in length" if len(verify) != len(accept) else
               "a step accepted more than it verified" if any(a > v for a, v in zip(accept, verify)) else
               "the lengths - 1 do not add up to num_verified_draft_tokens and num_accepted_draft_tokens"
               if any(n is not None and n != sum(lengths) - len(lengths)
                      for n, lengths in zip(sums, (verify, accept))) else None)
    steps = [] if problem else [(a - 1, v - 1) for a, v in zip(accept, verify)]
    tokens = (meta if native else body.get("usage") or {}).get("completion_tokens")
    problem = problem or contradiction(steps, tokens)
    if problem:
        raise ValueError(f"{where}: {problem}; the response is damaged")
    return StepRequest(request, max((v for _, v in steps), default=0), steps, tokens)
