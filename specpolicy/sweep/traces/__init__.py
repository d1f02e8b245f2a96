"""Importers of real models' acceptance traces into a sweep store, one module per format (its record type, its
checks, its store writer), told apart by one rule: the first format of :data:`FORMATS` whose ``sniff`` accepts
the file's first object. Each import says what replay is exact for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specpolicy.arguments import check_candidate_set
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
    return form.load(files if len(files) > 1 else file, Path(out), args)
