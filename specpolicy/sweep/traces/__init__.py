"""Importers of real models' acceptance traces into a sweep store, one module per format (its record type, its
checks, its store writer), told apart by one rule: the first format of :data:`FORMATS` whose ``sniff`` accepts
the file's first object. Each import says what replay is exact for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specpolicy.arguments import check_candidate_set
from specpolicy.files import atomic_path
from specpolicy.sweep.settings import SweepSettings
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces import calibration, dflash_mlx, llamacpp, profile, spec_bench, specdecode, vllm
from specpolicy.sweep.traces.common import TraceImport, first_object, trace_file
from specpolicy.sweep.traces.profile import ProfileDraw
from specpolicy.sweep.traces.sglang import FORMAT as SGLANG
from specpolicy.sweep.traces.sglang import sglang_response


@dataclass(frozen=True)
class TraceArgs:
    """What ``import-traces`` was given, for whichever format the file is."""

    drafter: str = "eagle"
    candidates: Sequence[int] | None = None
    dataset: str | None = None
    draw: ProfileDraw = field(default_factory=ProfileDraw)
    given: frozenset[str] = frozenset()
    """options a user gave (drafter, requests, tokens, seed): one a format does not read is refused"""
    prefill: tuple[str, str, str] | None = None
    """(prompts, target, drafter): the requests' prompts by id (a prompt set or file), prefilled by them"""

    def __post_init__(self) -> None:
        if self.candidates is not None:  # the command's check, for callers from Python too
            object.__setattr__(self, "candidates", check_candidate_set(self.candidates, "candidates"))

    def one_block(self, file: Path) -> int | None:
        """The one block size a per-step record's run drafted (``None``: the run's own)."""
        if self.candidates is not None and len(self.candidates) != 1:
            raise ValueError(f"{file} holds per-step records of one run: pass the one block size it drafted "
                             f"as --candidates N (default: the run's), not {list(self.candidates)}")
        return self.candidates[0] if self.candidates else None


@dataclass(frozen=True)
class TraceFormat:
    name: str
    sniff: Callable[[Path, dict], bool]
    """whether a file (its path, its first JSON object) is of this format"""
    load: Callable[[Path, Path, TraceArgs], TraceImport]
    reads: tuple[str, ...] = ()
    """the options of :class:`TraceArgs` it reads beyond the block sizes and the dataset's name"""


FORMATS = (
    TraceFormat(calibration.FORMAT, lambda file, first: file.name in calibration.BANKS,
                lambda file, out, a: calibration.import_calibration(file, out, a.one_block(file), a.dataset)),
    TraceFormat(profile.FORMAT, lambda file, first: "conditional_accept_rates" in first,
                lambda file, out, a: profile.import_profile(file, out, a.candidates, a.dataset, a.draw),
                ("requests", "tokens", "seed")),
    TraceFormat(spec_bench.FORMAT, lambda file, first: "question_id" in first,
                lambda file, out, a: spec_bench.import_spec_bench(file, out, a.one_block(file), a.dataset)),
    TraceFormat(llamacpp.FORMAT, lambda file, first: "timings" in first,
                lambda file, out, a: llamacpp.import_llamacpp(file, out, a.one_block(file), a.dataset)),
    TraceFormat(dflash_mlx.FORMAT, lambda file, first: {"block_len", "acceptance_len"} <= set(first),
                lambda file, out, a: dflash_mlx.import_dflash_mlx(file, out, a.one_block(file), a.dataset)),
    TraceFormat(SGLANG, lambda file, first: bool({"meta_info", "sglext"} & set(first)),
                lambda file, out, a: vllm.import_steps(file, out, a.one_block(file), a.dataset,
                                                       sglang_response, SGLANG)),
    TraceFormat(vllm.FORMAT, lambda file, first: bool({"metrics", "choices"} & set(first)),
                lambda file, out, a: vllm.import_steps(file, out, a.one_block(file), a.dataset)),
    TraceFormat(specdecode.FORMAT, lambda file, first: True,  # the per-position JSONL: what is left
                lambda file, out, a:
                specdecode.import_specdecode(file, out, a.drafter, a.candidates, a.dataset), ("drafter",)),
)
"""every format ``import-traces`` reads, in the order their ``sniff`` is asked"""


def import_traces(file: str | Path | Sequence[str | Path], out: str | Path, args: TraceArgs = TraceArgs()
                  ) -> TraceImport:
    """A trace file of :data:`FORMATS`, told apart by its first object (several: vLLM or SGLang runs)."""
    files = [trace_file(f, "a SpecDecode-Bench trace, a Spec-Bench answer file, vLLM, SGLang or llama.cpp "
                           "responses, dflash-mlx's cycle_events.jsonl, a speculation_profile.json or a "
                           "calibration bank's acceptance.parquet")
             for f in ([file] if isinstance(file, str | Path) else file)]
    forms = [next(f for f in FORMATS if f.sniff(path, first_object(path))) for path in files]
    form, file, unread = forms[0], files[0], sorted(args.given - set(forms[0].reads))
    if unread:
        raise ValueError(f"{file} is {form.name}, which does not read {', '.join('--' + o for o in unread)}; "
                         "drop it")
    if len(files) > 1 and ({f.name for f in forms} not in ({SGLANG}, {vllm.FORMAT}) or args.candidates):
        raise ValueError(f"several runs import into one store from vLLM or SGLang responses, one engine's, "
                         f"each file's block its own (no --candidates); these are {[f.name for f in forms]}")
    if args.prefill:  # the prompt set read once, before anything is written
        from specpolicy.data.registry import load_prompts

        by_id = {p.id: p for p in load_prompts(args.prefill[0])}
    result = form.load(files if len(files) > 1 else file, Path(out), args)
    return replace(result, store=with_prefill(result.store, by_id, *args.prefill)) if args.prefill else result


def with_prefill(store: SweepStore, by_id: dict, prompts: str, target: str, drafter: str) -> SweepStore:
    """``store`` with each record's prefill logits [V] (what BlockPilot reads; an engine records none): its
    prompt, by request id in ``by_id`` (the prompt set or file ``prompts``), encoded as a sweep encodes it."""
    from specpolicy.data.prompts import encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.decoding.autoregressive import own_answer
    from specpolicy.models import load_pair
    from specpolicy.sweep.run import prompt_fields

    settings, records = {"prompts": prompts, "target": target, "drafter": drafter}, list(store.records())
    if store.meta.get("prefill") == settings and all(r.features for r in records):
        return store  # an earlier import's
    missing = [r.prompt_id for r in records if r.prompt_id.partition(":")[2] not in by_id]
    if missing:
        raise ValueError(f"{prompts} holds no prompt with the id of request {missing[0]} ({len(missing)} of "
                         f"{len(records)}): pass the prompts the engine ran, each under its request's id")
    pair = load_pair(target, drafter)
    decoder = SpeculativeDecoder(pair.target, pair.drafter)
    limit, meta = SweepSettings().prompt_tokens(decoder.max_positions), store.meta | {"prefill": settings}
    answer = own_answer(decoder)  # multi-turn prompts: the target's earlier answers, decoded once
    with atomic_path(store.path, "meta.json") as tmp, SweepStore.open(tmp, meta) as out:
        for record in records:  # split as a sweep of these prompts splits (by conversation and input)
            prompt = by_id[record.prompt_id.partition(":")[2]]
            ids = encode_prompt(pair.tokenizer, prompt, limit, answer)
            record = record.model_copy(update=prompt_fields(ids, prompt))
            out.append(record, decoder.start(ids).prefill_logits)
    return SweepStore.load(store.path)
