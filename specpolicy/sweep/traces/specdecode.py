"""SpecDecode-Bench's per-position JSONL: each generated position's tokens a chain drafter's draft from there
would commit (``acc_eagle``: EAGLE-3, ``acc_ngram``: n-gram); every block up to the longest run replays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE, MAX_RECORDED_RUN, TRAINING_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import common

FORMAT = "specdecode-bench"
SPECDECODE_DRAFTERS = ("eagle", "ngram")
"""the chain drafters a SpecDecode-Bench trace records (``acc_eagle``: EAGLE-3, ``acc_ngram``: n-gram)"""


@dataclass(frozen=True)
class SpecDecodeRequest:
    """One request: its id, prompt and generated token ids, and what a draft at each position commits."""

    id: str
    prompt: list[int]
    tokens: list[int]
    lengths: list[int]


def specdecode_request(file: Path, line_number: int, line: bytes, drafter: str) -> SpecDecodeRequest:
    """One line's :class:`SpecDecodeRequest`; a ValueError naming the line otherwise."""
    body, where = common.json_line(file, line_number, line)
    try:
        request = common.request_id(body, "id", where)
        prompt, tokens = body["prompt_token_ids"], body.get("generated_token_ids", [])
        lengths = body[f"acc_{drafter}"]["acc_len"]
    except (KeyError, TypeError) as missing:
        raise ValueError(f"{where} has no {missing} field: not a SpecDecode-Bench trace with "
                         f"acc_{drafter}.acc_len (docs: importing traces)") from None
    for name, values, least, most in (("prompt_token_ids", prompt, 0, None),
                                      ("generated_token_ids", tokens, 0, None),
                                      (f"acc_{drafter}.acc_len", lengths, 1, MAX_RECORDED_RUN)):
        if not common.counts(values, least, most):
            why = (f" and <= {most:,} (tokens committed per draft: its accepted drafts + the target's own)"
                   if most else "")
            raise ValueError(f"{where} (request {request}): {name} must be a list of integers >= "
                             f"{least}{why}")
    past = next((i for i, n in enumerate(lengths) if n > len(lengths) - i + MAX_BLOCK_SIZE), None)
    if past is not None:  # the real traces draft at most 20 past a cut request's end
        raise ValueError(f"{where} (request {request}): acc_{drafter}.acc_len[{past}] = {lengths[past]} "
                         f"commits more than the {len(lengths) - past} tokens left and a block "
                         f"({MAX_BLOCK_SIZE}) past the request's end; the trace is damaged")
    return SpecDecodeRequest(request, prompt, tokens, lengths)


def import_specdecode(file: str | Path, out: str | Path, drafter: str = "eagle",
                      candidates: Sequence[int] | None = None, dataset: str | None = None
                      ) -> common.TraceImport:
    """Read a SpecDecode-Bench trace (JSONL: ``id``, ``prompt_token_ids``, ``generated_token_ids``,
    ``acc_{drafter}.acc_len``) into chain replay tables: a block of B accepts min(acc_len[i] - 1, B - 1) at
    position i, exact up to the longest accepted run recorded; a token array of another length (another run)
    is counted in ``other_run_tokens``. ``candidates``: 1 up to the training block or the longest recorded."""
    if drafter not in SPECDECODE_DRAFTERS:
        raise ValueError(f"unknown drafter {drafter!r}; the traces record {', '.join(SPECDECODE_DRAFTERS)}")
    file = common.trace_file(file, "a SpecDecode-Bench file such as data/llama3.1-8B/combined_gsm8k.jsonl")
    dataset = dataset or file.stem.removeprefix("combined_")
    requests = [specdecode_request(file, n, line, drafter) for n, line in common.jsonl_lines(file)]
    if not requests:
        raise ValueError(f"{file} holds no requests; pass a SpecDecode-Bench trace file (one JSON object a "
                         "line)")
    longest = max((max(r.lengths, default=1) for r in requests), default=1) - 1
    candidates = range(1, min(TRAINING_BLOCK_SIZE, longest + 1) + 1) if candidates is None else candidates
    too_long = [b for b in candidates if b - 1 > longest]
    if too_long:
        raise ValueError(f"{file}: the longest accepted run is {longest} drafts, so blocks {too_long} "
                         f"cannot be replayed exactly (their drafts past {longest} were never recorded); "
                         f"pass --candidates 1-{longest + 1} or fewer")
    sizes = tuple(sorted(candidates))
    skipped = {r.id: "the prefill's token is the whole output: nothing to draft" for r in requests
               if len(r.lengths) < 2}
    meta = common.store_meta(file, dataset, FORMAT, sizes, drafter=drafter, drafter_kind="chain",
                             recorded=longest + 1)
    store = SweepStore.fill(out, meta, (
        common.chain_record(f"{dataset}:{r.id}", index, [a - 1 for a in r.lengths], sizes, r.prompt, dataset)
        for index, r in enumerate(requests) if r.id not in skipped))
    other = [r.id for r in requests if r.id not in skipped and len(r.tokens) != len(r.lengths)]
    return common.TraceImport(store, len(requests) - len(skipped), longest, other, skipped,
                              f"block sizes {sizes[0]}..{sizes[-1]} (chain drafts: a prefix of the longest "
                              "at each B)")
