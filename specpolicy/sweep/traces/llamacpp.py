"""llama.cpp responses from a patched server (``specpolicy engine build``): ``timings.spec_steps`` records
every drafting step with the drafter's probability of each draft, so a fixed setting's run with every draft
verified imports as rounds, exact for its block and verify lengths up to it (``ReplayTable.rounds``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import common
from specpolicy.sweep.traces.common import TraceImport, per_step_record, store_meta

if TYPE_CHECKING:
    from specpolicy.engines.llamacpp import Step

FORMAT = "llamacpp-steps"


def engine_response(file: Path, line_number: int, line: bytes) -> tuple[str, list[Step], int | None]:
    """(id, steps, tokens output or ``None``) of a response line, else a ValueError naming the problem."""
    from specpolicy.engines.llamacpp import Step

    body, where = common.json_line(file, line_number, line)
    rid = common.request_id(body, "id", where) if "id" in body else str(line_number)
    steps = (body.get("timings") or {}).get("spec_steps")
    if not isinstance(steps, list):
        raise ValueError(f"{where} has no timings.spec_steps: a response of a server built by `specpolicy "
                         "engine build` (patched) carries them; a stock llama-server's does not")
    where, parsed = f"{where} (request {rid})", []
    for step in steps:
        try:
            counts, p = [step["block"], step["drafted"], step["verified"], step["accepted"]], step["p"]
        except (KeyError, TypeError):
            raise ValueError(f"{where}: a step lacks block, drafted, verified, accepted or p; the response "
                             "is damaged") from None
        block, drafted, verified, accepted = counts
        try:
            if not (common.counts(counts, 0) and 1 <= block <= MAX_BLOCK_SIZE
                    and accepted <= verified <= drafted < block and isinstance(p, list) and len(p) == drafted
                    and all(isinstance(x, float | int) and 0 <= x <= 1 for x in p)):
                raise ValueError
            parsed.append(Step.from_json(step))  # its timings too
        except (TypeError, ValueError):
            raise ValueError(f"{where}: a step's counts or probabilities are impossible ({step}); the "
                             "response is damaged") from None
    tokens = body.get("tokens")
    tokens = len(tokens) if isinstance(tokens, list) else body["timings"].get("predicted_n")
    return rid, parsed, tokens if type(tokens) is int and tokens > 0 else None


def run_block(file: Path, responses: list[tuple[str, list[Step], int | None]], given: int | None = None
              ) -> int:
    """The one block a fixed setting's run drafted (``given``, else its largest), every smaller step one the
    budget's room capped (the tokens left of n_predict, at least the output's length); a ValueError for a
    per-step plan's steps, or where the budget capped every block."""
    size = given or max((s.block for _, run, _ in responses for s in run), default=0)
    if size == 0:
        raise ValueError(f"{file}: no response records a drafting step")
    if given is None and all(tokens and 1 + run[0].block >= tokens for _, run, tokens in responses if run):
        raise ValueError(f"{file}: llama.cpp capped every block at its budget (n_predict), so the run's "
                         f"block is not in the record (the largest drafted: {size}); import it with "
                         "--candidates B, the block the run drafted")
    for rid, run, tokens in responses:
        produced, budget, capped = 1, None, 0
        for step in run:
            if budget is None and step.block < size and produced + step.block >= (tokens or 0):
                budget, capped = produced + step.block, step.block  # the first step the budget capped
            if step.block != (size if budget is None else min(size, budget - produced)):
                # a smaller block, or a capped one that a later step shows the budget did not cap
                raise ValueError(f"{file} (request {rid}): a step drafted a block of {capped or step.block} "
                                 f"where the run's is {size} with room for more: import the steps of one "
                                 "fixed setting (fixedN, llamacpp-pmin), not a per-step plan's")
            produced += step.accepted + 1
    return size


def import_llamacpp(file: str | Path, out: str | Path, block_size: int | None = None,
                    dataset: str | None = None) -> TraceImport:
    """Read llama.cpp responses (JSONL, one ``/completion`` answer a line, with an ``id``) of one fixed
    setting with every draft verified into rounds at its block, with the engine's confidences."""
    file = common.trace_file(file, "a JSONL of llama-server responses carrying timings.spec_steps")
    dataset = dataset or file.stem
    responses = [engine_response(file, n, line) for n, line in common.jsonl_lines(file)]
    steps = [s for _, run, _ in responses for s in run]
    size = run_block(file, responses, block_size)
    if any(s.verified < s.drafted for s in steps):
        raise ValueError(f"{file}: the run cut its verifies (a p_min above 0), so what the cut drafts would "
                         "have done is unknown; record with every draft verified (fixedN, or p_min=0)")
    meta = store_meta(file, dataset, FORMAT, [size], training_block_size=size, confidence_sizes=[size],
                      drafter_kind="block")
    store = SweepStore.fill(out, meta, (
        per_step_record(index, f"{dataset}:{rid}", [s.accepted + 1 for s in run], None, dataset,
                        f"{dataset}:{rid}", size, tokens,
                        # a position the budget's room left undrafted reads as probability 0
                        [list(s.probabilities) + [0.0] * (size - 1 - s.drafted) for s in run])
        for index, (rid, run, tokens) in enumerate(responses) if run))
    return TraceImport(store, sum(1 for _, run, _ in responses if run), max(s.accepted for s in steps), [],
                       {rid: "no drafting step" for rid, run, _ in responses if not run},
                       f"each of {len(steps)} steps at B = {size} (fixed, and verify lengths up to it read "
                       "from the engine's confidences), per step: a cut step commits less and the next "
                       "step is the recording's")
