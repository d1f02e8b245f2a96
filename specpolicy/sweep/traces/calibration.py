"""Calibration banks (inference-lab's schema; ``Doubleword/qwen3.6-specdec-calibration``): a run folder's
``acceptance.parquet`` and ``speculator.parquet`` joined on :data:`KEY`, imported as rounds at the drafted
block with the drafter's confidences, exact per round (docs/real-data.md). Needs pyarrow."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specpolicy.defaults import BLOCK_SPECULATORS, MAX_BLOCK_SIZE
from specpolicy.sweep.store import SweepStore
from specpolicy.sweep.traces.common import TraceImport, per_step_record, store_meta, trace_file

FORMAT = "calibration-bank"
KEY = ("model", "speculator", "config", "category", "prompt_idx", "turn", "round_idx")
"""the columns both banks share, one row per draft round"""
BANKS = ("acceptance.parquet", "speculator.parquet")


@dataclass(frozen=True)
class CalibrationBank:
    """Both banks joined, sorted by :data:`KEY`: the key columns, drafts committed [n], confidences [n, D]."""

    keys: dict[str, list]
    accepted: np.ndarray
    confidences: np.ndarray


def _read(path: Path, numbered: str, *required: str) -> tuple:
    """(the parquet file sorted by :data:`KEY` as a pyarrow Table, how many ``numbered`` columns it has:
    acc0.. or conf0..); a ValueError naming what is missing."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"reading {path} needs pyarrow: pip install 'specpolicy[calibration]'") from None
    if not path.is_file():
        raise ValueError(f"{path} is missing: a calibration run folder holds {' and '.join(BANKS)}")
    try:
        table = pq.read_table(path)
    except Exception as error:  # pyarrow's errors differ by version: one message for a damaged file
        raise ValueError(f"{path} is not a readable parquet file ({type(error).__name__}); fetch it again") \
            from None
    missing = [c for c in [*KEY, *required, f"{numbered}0"] if c not in table.column_names]
    if missing:
        raise ValueError(f"{path} lacks the columns {missing}: not a calibration bank (inference-lab's "
                         f"schema: {', '.join(KEY)}, then {', '.join(required)} {numbered}0..)")
    depth = next(k for k in range(len(table.column_names) + 1) if f"{numbered}{k}" not in table.column_names)
    return table.sort_by([(k, "ascending") for k in KEY]), depth


def _matrix(table, numbered: str, depth: int) -> np.ndarray:
    """Columns ``numbered``0.. as float64 [n, depth] (null: NaN)."""
    return np.stack([table.column(f"{numbered}{k}").to_numpy(zero_copy_only=False).astype(np.float64)
                     for k in range(depth)], axis=1)


def read_bank(folder: Path) -> CalibrationBank:
    """Both banks of a run folder, checked: the same rounds in each, the accept mask a prefix of
    ``accept`` drafts, every round drafting the same D tokens, confidences in [0, 1]."""
    verify, masked = _read(folder / BANKS[0], "acc", "accept")
    draft, depth = _read(folder / BANKS[1], "conf")
    if not verify.select(list(KEY)).equals(draft.select(list(KEY))):
        raise ValueError(f"{folder}: the two banks hold different rounds; both must come from one run")
    confidences, masks = _matrix(draft, "conf", depth), _matrix(verify, "acc", masked)
    accepted = verify.column("accept").to_numpy(zero_copy_only=False).astype(np.float64)
    d = int((~np.isnan(confidences)).sum(axis=1).max(initial=0))
    problem = _problem(confidences, d, accepted, masks)
    if problem:
        raise ValueError(f"{folder}: {problem}; the bank is damaged or not of this schema")
    keys = {k: verify.column(k).to_pylist() for k in KEY}
    return CalibrationBank(keys, accepted.astype(np.int64), confidences[:, :d])


def _problem(confidences: np.ndarray, d: int, accepted: np.ndarray, masks: np.ndarray) -> str | None:
    """What makes rounds of ``d`` drafts unreplayable at one block (``None``: nothing)."""
    drafted = (~np.isnan(confidences)).sum(axis=1)
    if d == 0:
        return "no round drafted a token"
    if drafted.min() != d:
        return f"rounds draft {drafted.min()} to {d} tokens; replay at one block needs every round alike"
    if d + 1 > MAX_BLOCK_SIZE:
        return f"a block of {d + 1} is past {MAX_BLOCK_SIZE}"
    if masks.shape[1] < d:
        return f"the accept mask has {masks.shape[1]} columns for {d} drafts"
    if ((confidences[:, :d] < 0) | (confidences[:, :d] > 1)).any():
        return "a confidence lies outside [0, 1]"
    if not np.all((accepted >= 0) & (accepted <= d) & (accepted == np.round(accepted))):
        return f"accept must be an integer in 0..{d}"
    if not np.array_equal(masks[:, :d] == 1, np.arange(d)[None, :] < accepted[:, None]):
        return "an accept mask is not the prefix of accept drafts"
    return None


def import_calibration(file: str | Path, out: str | Path, block_size: int | None = None,
                       dataset: str | None = None) -> TraceImport:
    """A calibration run folder (``file``: either bank) into a store of rounds, one decode per (category,
    prompt, turn), its rounds in ``round_idx`` order at B = D + 1 with the drafter's confidences."""
    file = trace_file(file, "a calibration bank's acceptance.parquet (speculator.parquet beside it)")
    bank = read_bank(file.parent)
    runs = sorted({(m, s, c) for m, s, c in zip(*(bank.keys[k] for k in KEY[:3]))}, key=str)
    if len(runs) != 1:
        raise ValueError(f"{file.parent} mixes {len(runs)} runs (model, speculator, config): "
                         f"{runs[:3]}; import one run folder at a time")
    model, speculator, config = runs[0]
    size = bank.confidences.shape[1] + 1
    if block_size not in (None, size):
        raise ValueError(f"{file.parent}: the run drafted {size - 1} tokens a round, a block of {size}; pass "
                         f"--candidates {size} or leave it out")
    decodes: dict[tuple, list[int]] = {}
    for row, key in enumerate(zip(*(bank.keys[k] for k in KEY[3:]))):
        decodes.setdefault(key[:3], []).append(row)
    repeated = [key for key, rows in decodes.items()
                if len({bank.keys["round_idx"][r] for r in rows}) != len(rows)]
    if repeated:
        raise ValueError(f"{file.parent}: a round is recorded twice in {repeated[:3]}; the bank is damaged")
    run_folder = file.resolve().parent  # <dataset>/<drafter>/<experiment>/ in the published layout
    dataset = dataset or (run_folder.parents[1].name if len(run_folder.parents) > 1 else run_folder.name)
    digest = hashlib.sha256((file.parent / BANKS[1]).read_bytes()).hexdigest()[:16]
    block = any(name in speculator.lower() for name in BLOCK_SPECULATORS)
    meta = store_meta(file.parent / BANKS[0], dataset, FORMAT, [size], training_block_size=size,
                      model=model, drafter=speculator, config=config, confidence_sizes=[size],
                      drafter_kind="block" if block else "chain",
                      speculator_sha256=digest)
    store = SweepStore.fill(out, meta, (
        per_step_record(index, f"{category}:{prompt}:{turn}", [int(bank.accepted[r]) + 1 for r in rows],
                        category, category, f"{category}:{prompt}", size,
                        confidences=bank.confidences[rows])
        for index, ((category, prompt, turn), rows) in enumerate(decodes.items())))
    return TraceImport(store, len(decodes), int(bank.accepted.max(initial=0)), [], {},
                       f"each of {len(bank.accepted)} rounds at B = {size} (fixed, and verify lengths up to "
                       f"it read from the recorded confidences), per round: a cut round commits less and the "
                       "next round is the recording's")
