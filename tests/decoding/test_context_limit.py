"""Near the context limit the session verifies only the positions left; the policy's own block size stays
the cycle's B, so a cost-aware policy never prices a size outside its candidates (issue: the default
crashed with "the cost table has no entry for block size 3" on a 2038-token prompt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specpolicy.costs import CostTable
from specpolicy.decoding import SpeculativeDecoder, engine
from specpolicy.registry import get_registry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TABLES = {"quiet": FIXTURES / "costs-quiet-2core.json",
          "gpu-shaped": FIXTURES / "costs-gpu-shaped-synthetic.json"}
LIVE_POLICIES = ["fixed16", "fixed32", "random", "heuristic", "grow", "adaptive", "blockpilot",
                 "blockpilot-guard", "threshold", "marginal", "adaptive-verify"]
"""every built-in that decodes live untrained over any table's sizes (blockpilot-paper chooses among 14..18,
which two of the tables do not price)"""


@pytest.fixture(scope="module")
def tiny_decoder():
    from specpolicy.models import load_pair

    pair = load_pair("tiny", "tiny")
    return SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=40, stop_token_ids=[])


def _tables() -> dict[str, CostTable]:
    from specpolicy.zoo import ZOO_DIR

    shipped = next((ZOO_DIR / "sweeps" / "sharegpt").glob("latency.json"))
    return {"shipped": CostTable.load(shipped)} | {name: CostTable.load(path) for name,
                                                   path in TABLES.items()}


def _decode_near_the_limit(decoder, name: str, costs: CostTable, left: int):
    """``name`` over the table's sizes on a prompt leaving ``left`` positions of the context."""
    policy = get_registry().create(name, [b for b in costs.block_sizes if b <= 32])
    prompt = [5 + (i * 7) % 200 for i in range(decoder.max_positions - left)]
    trace = engine.decode(decoder, prompt, policy, prompt_id="x", costs=costs)
    assert trace.stop_reason in ("context", "max_new_tokens")
    # the policy's B, whatever the context left
    assert {c.block_size for c in trace.cycles} <= policy.choices()
    assert all(c.verify_length <= c.block_size for c in trace.cycles)
    return trace


@pytest.mark.parametrize("name", ["blockpilot-guard", "adaptive"])
@pytest.mark.parametrize("left", [7, 10, 13])
def test_the_default_decodes_to_the_context_limit(tiny_decoder, name, left):
    costs = CostTable.load(TABLES["quiet"])
    trace = _decode_near_the_limit(tiny_decoder, name, costs, left)
    # the context held every token the target read (all but the last)
    assert len(trace.output_ids) <= left + 1


@pytest.mark.slow  # every live built-in x 3 tables x 4 lengths (about 30 s)
@pytest.mark.parametrize("table", ["shipped", "quiet", "gpu-shaped"])
def test_every_builtin_policy_decodes_to_the_context_limit_under_each_table(tiny_decoder, table):
    costs = _tables()[table]
    for name in LIVE_POLICIES:
        for left in (2, 7, 13, 31):
            _decode_near_the_limit(tiny_decoder, name, costs, left)
