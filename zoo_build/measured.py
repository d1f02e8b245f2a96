"""Builds the shipped measured GPU cost tables (``python -m zoo_build measured``) from the rows of CAST's
``data/cost_probes.json`` kept verbatim in ``specpolicy/zoo/measured/cast-cost-probes.json`` (MIT, NOTICE.md).

CAST measured, at batch one in bfloat16, the target's forward over n packed tokens (n = 1, 4, 8, 16, 24, ...,
128) after a KV prefix, and the DFlash drafter's forward over a block of 16. Derived here: the target's
pass made non-decreasing in n by isotonic regression (repeats of one probe differ by up to 10%), read at
every block size 1..16 by linear interpolation between the measured n, and 24, 32 as measured points; the
drafter's pass priced at its measured time for every B > 1 (one forward drafts the whole block); the plain
step is the measured n = 1 forward.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression

from specpolicy.costs import CostTable
from specpolicy.zoo import MEASURED_DIR

SOURCE = MEASURED_DIR / "cast-cost-probes.json"
BLOCK_SIZES = (*range(1, 17), 24, 32)


def table_name(probe: dict) -> str:
    """``cast-h100-sxm-qwen3-8b-context-1024.json`` (CAST's table 5 rows end ``-t5``: a second probe)."""
    model = probe["target"].split("/")[-1].lower().removesuffix("-instruct")
    gpu = probe["gpu"].lower().replace(" ", "-")
    return f"cast-{gpu}-{model}-context-{probe['prefix']}{'-t5' if probe['table'] == 5 else ''}.json"


def cost_table(probe: dict, origin: str) -> CostTable:
    """One CAST probe row as the per-block-size :class:`CostTable` replay prices with (seconds)."""
    n = np.asarray(probe["n"], dtype=float)
    fitted = IsotonicRegression(increasing=True).fit_transform(n, np.asarray(probe["ms"], dtype=float)) / 1e3
    verify = {b: float(np.interp(b, n, fitted)) for b in BLOCK_SIZES}
    draft = {b: (probe["draft_ms"] / 1e3 if b > 1 else 0.0) for b in BLOCK_SIZES}
    return CostTable(draft, verify, probe["ms"][0] / 1e3, dtype="bfloat16", device="cuda",
                     machine=probe["device"],
                     context_length=int(probe["prefix"]),
                     source=f"{origin}, table {probe['table']}: {probe['target']} batch-1 forward after "
                            f"{probe['prefix']} tokens, measured at n = {probe['n'][:5]}...; isotonic in n, "
                            "interpolated between measured n; the DFlash drafter's block-16 pass for every B "
                     "> 1")


def build(source: Path = SOURCE, out: Path = MEASURED_DIR) -> list[Path]:
    """Write one table per probe row of ``source``; the paths written."""
    body = json.loads(source.read_text())
    paths = []
    for probe in body["probes"]:
        path = out / table_name(probe)
        cost_table(probe, body["source"].split(" (")[0]).save(path)
        paths.append(path)
    return paths


STEPS = MEASURED_DIR / "h200-sxm-steps-torch.json"
"""specpolicy's own H200 steps (``python -m benchmarks.gpu_steps``), milliseconds"""


def _seconds(rows: dict, lengths: bool = True) -> dict:
    """``{"b": {"n": ms}}`` (or ``{"b": ms}``) as ``{b: {n: s}}`` (or ``{b: s}``)."""
    if not lengths:
        return {int(b): ms / 1e3 for b, ms in rows.items()}
    return {int(b): {int(n): ms / 1e3 for n, ms in row.items()} for b, row in rows.items()}


def steps_tables(source: Path = STEPS, out: Path = MEASURED_DIR) -> list[Path]:
    """Write ``torch-h200-sxm-{model}-{drafter}-context-{n}.json``: the measured steps as batch cost tables,
    each point the cheapest measured shape of at least that many requests and tokens (an engine pads to it);
    the DFlash drafter's measured pass over each block, or the EAGLE-3 head's per drafted position."""
    from specpolicy.bench.serving_costs import padded
    from specpolicy.replay.batch_costs import BatchCostTable

    body = json.loads(source.read_text())
    paths = []
    for model, steps in body["models"].items():
        for context in steps["verify"]:
            verify = padded(_seconds(steps["verify"][context]))
            block = padded({b: {n: s for n, s in row.items() if n > 1}
                            for b, row in _seconds(steps["dflash"][context]).items()})
            heads = padded({b: {1: s} for b, s in _seconds(steps["eagle3"][context], False).items()})
            chain = {b: {n: (n - 1) * heads[b][1] for n in row if n > 1} for b, row in verify.items()}
            for drafter, kind, draft in (("dflash", "block", block), ("eagle3", "chain", chain)):
                about = ("its 5 layers and the target's head over each block, measured" if kind == "block"
                         else "one layer and a 32,000-token head per drafted position, measured")
                path = out / f"torch-h200-sxm-{model}-{drafter}-context-{context}.json"
                BatchCostTable(verify, draft, None, f"{body['device']} (PyTorch, CUDA graphs; measured)",
                               "bfloat16", int(context), {},
                               f"{body['source']}; {drafter}: {about}; each point the cheapest measured "
                               "shape of at least that many requests and tokens", kind).save(path)
                paths.append(path)
    return paths
