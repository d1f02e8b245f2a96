"""The shipped measured GPU cost tables: each is what its CAST rows give, and each says where it comes
from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specpolicy.costs import CostTable
from specpolicy.zoo import MEASURED_DIR
from zoo_build.measured import SOURCE, cost_table, table_name

PROBES = json.loads(SOURCE.read_text())["probes"]


@pytest.mark.parametrize("probe", PROBES, ids=table_name)
def test_each_shipped_table_is_what_its_cast_row_gives(probe):
    shipped = CostTable.load(MEASURED_DIR / table_name(probe))
    built = cost_table(probe, "CAST")
    assert shipped.block_sizes == built.block_sizes == (*range(1, 17), 24, 32)
    np.testing.assert_allclose([shipped.verify_seconds[b] for b in shipped.block_sizes],
                               [built.verify_seconds[b] for b in built.block_sizes], rtol=1e-12)
    assert shipped.ar_seconds == pytest.approx(probe["ms"][0] / 1e3, rel=1e-12)
    assert shipped.draft_seconds[16] == pytest.approx(probe["draft_ms"] / 1e3, rel=1e-12)
    assert shipped.context_length == probe["prefix"] and shipped.machine == probe["device"]
    assert "js-lee-AI/CAST@308e3f8" in shipped.source and probe["target"] in shipped.source
    assert shipped.check() == []  # non-decreasing in B: the isotonic fit


def test_measured_points_survive_and_the_fit_only_pools_falling_neighbours():
    """Where CAST's curve rises the table reads it unchanged; a dip is pooled with its neighbour (the
    mean)."""
    llama = next(p for p in PROBES if "Llama" in p["target"])
    table = cost_table(llama, "CAST")
    ms = dict(zip(llama["n"], llama["ms"]))
    assert table.verify_seconds[1] == pytest.approx(ms[1] / 1e3)
    # 18.31 ms pooled with the lower 8, 16, 24 ... points
    assert table.verify_seconds[4] >= ms[4] / 1e3 * 0.97
    rising = next(p for p in PROBES if p["target"] == "Qwen/Qwen3-8B" and p["prefix"] == 16384)
    long = cost_table(rising, "CAST")
    assert long.verify_seconds[16] / long.ar_seconds == pytest.approx(56.73607 / 23.68819, rel=1e-6)
    assert long.verify_seconds[2] == pytest.approx((23.68819 + (55.25742 - 23.68819) / 3) / 1e3, rel=1e-9)


def test_every_shipped_file_has_its_row_and_the_notice():
    shipped = {p.name for p in MEASURED_DIR.glob("cast-*-context-*.json")}
    assert shipped == {table_name(p) for p in PROBES}
    notice = (MEASURED_DIR / "NOTICE.md").read_text()
    assert "MIT License" in notice and "308e3f8ee343fa9477531ff36760b8d3e62164ae" in notice


def test_the_measured_h200_tables_are_what_the_steps_give_each_point_a_measured_shape(tmp_path):
    """``python -m zoo_build measured-steps``: every shipped ``torch-h200-*`` table is rebuilt from the
    steps and compared; each point is a measured step of at least that many requests and tokens, and the
    DFlash drafter a measured block pass, the EAGLE-3 head a measured pass per drafted position."""
    from specpolicy.replay.batch_costs import BatchCostTable
    from zoo_build.measured import STEPS, steps_tables

    built = steps_tables(out=tmp_path)
    assert {p.name for p in built} == {p.name for p in MEASURED_DIR.glob("torch-h200-*.json")}
    steps = json.loads(STEPS.read_text())["models"]
    for path in built:
        table, shipped = BatchCostTable.load(path), BatchCostTable.load(MEASURED_DIR / path.name)
        assert table.check() == [] and (table.drafter, table.context_length) == (shipped.drafter,
                                                                                 shipped.context_length)
        for b in table.batch_sizes:
            np.testing.assert_allclose(list(table.verify[b].values()), list(shipped.verify[b].values()),
                                       rtol=1e-12)
        model = path.name.removeprefix("torch-h200-sxm-").split("-dflash")[0].split("-eagle3")[0]
        measured = steps[model]["verify"][str(table.context_length)]
        for b, row in table.verify.items():
            for n, seconds in row.items():  # the cheapest of the measured shapes at least (b, n)
                at_least = [ms for bb, r in measured.items() if int(bb) >= b for nn, ms in r.items()
                            if int(nn) >= n]
                assert seconds == pytest.approx(min(at_least) / 1e3, rel=1e-12)
        assert "measured by specpolicy" in table.source and "H200" in table.machine
