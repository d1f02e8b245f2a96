"""The synthetic roofline batch table: hand-worked passes, and the shipped file is what the model gives."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.zoo import ZOO_DIR
from zoo_build.roofline import QWEN3_4B, PassShape, roofline_batch_costs

SHIPPED = ZOO_DIR / "batch-costs-h200-synthetic.json"


def test_qwen3_4b_on_an_h200_by_hand():
    """36 layers of (2560 x 4096 + 2 x 2560 x 1024 + 4096 x 2560 + 3 x 2560 x 9728) + the 151936 x 2560 head:
    4,022,272,000 weights; one token after 1024 of context reads 8.04 GB of weights and 1025 x 147,456 bytes
    of KV cache at 4.8 TB/s: 1.707 ms, memory-bound."""
    shape = PassShape.of(QWEN3_4B)
    assert shape.params == 4_022_272_000 and shape.kv_bytes_per_position == 147_456
    table = roofline_batch_costs("H200")
    assert table.verify[1][1] == pytest.approx((2 * 4_022_272_000 + 1025 * 147_456) / 4.8e12, rel=1e-9)
    flops = 2 * 4_022_272_000 * 256 * 16 + 4 * 36 * 4096 * 256 * 16 * 1040  # 256 x 16 tokens: compute-bound
    assert table.verify[256][16] == pytest.approx(flops / 989e12, rel=1e-9)
    assert table.verify[4][16] < 1.1 * table.verify[1][1]  # 64 tokens cost little more than one: memory-bound
    assert table.check() == [] and "synthetic" in table.machine


def test_the_shipped_table_is_what_the_model_gives():
    shipped = BatchCostTable.load(SHIPPED)
    built = roofline_batch_costs()
    assert shipped.machine == built.machine and shipped.batch_sizes == built.batch_sizes
    for b in built.batch_sizes:
        np.testing.assert_allclose(list(shipped.verify[b].values()), list(built.verify[b].values()),
                                   rtol=1e-9)
        np.testing.assert_allclose(list(shipped.draft[b].values()), list(built.draft[b].values()), rtol=1e-9)


def test_an_unknown_gpu_names_the_known_ones():
    with pytest.raises(ValueError, match="known: H200, H100"):
        roofline_batch_costs("A100")


def test_the_build_command_writes_the_shipped_table(tmp_path):
    from typer.testing import CliRunner

    from zoo_build.__main__ import app

    result = CliRunner().invoke(app, ["roofline", "--out", str(tmp_path / "h200.json")])
    assert result.exit_code == 0, result.output
    built = BatchCostTable.load(tmp_path / "h200.json")
    assert built.machine == BatchCostTable.load(SHIPPED).machine and built.batch_sizes[-1] == 256


def test_the_build_command_names_an_unknown_gpu_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from zoo_build.__main__ import app

    result = CliRunner().invoke(app, ["roofline", "--gpu", "A100", "--out", str(tmp_path / "a100.json")])
    said = " ".join(result.output.replace("│", " ").split())  # rich boxes and wraps the message
    assert result.exit_code == 2 and "known: H200, H100" in said and "Traceback" not in said
    assert not (tmp_path / "a100.json").exists()
