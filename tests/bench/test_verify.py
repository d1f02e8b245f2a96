"""bench verify: (B, L) replay agrees with live decoding for policies with verify rules."""

from __future__ import annotations

import pytest

from specpolicy.bench.verify import bench_verify, cycles_agree
from specpolicy.costs import uniform_costs
from specpolicy.cycles import CycleRecord
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.registry import get_registry


def test_verify_policies_replay_exactly(trained_pair):
    sizes = [1, 2, 4, 8]
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=30)
    policies = [get_registry().create(name, sizes) for name in ("threshold", "marginal8", "adaptive-verify")]
    results = bench_verify(decoder, [[4, 7, 5, 9], [8, 7, 9, 9]], sizes, policies,
                           uniform_costs(sizes, ar_seconds=0.01, per_token=0.05), 30)
    for result in results:
        assert result.compared > 0 and result.agreeing == result.compared, result.notes
    assert sum(r.cut for r in results) > 0  # the rules did cut blocks


@pytest.mark.parametrize(("live", "replayed", "expected"), [
    ([(16, 3, 4), (16, 15, 16)], [(16, 3, 4), (16, 15, 16)], (2, 2, None)),
    ([(16, 3, 4), (16, 15, 16)], [(16, 3, 4), (16, 14, 15)], (1, 2, 1)),  # accepted differs at cycle 1
    ([(16, 3, 4)], [(16, 3, 4), (4, 0, 1)], (1, 2, 1)),  # one decode ran a cycle more
    ([(8, 3, 4, 6)], [(8, 3, 4)], (0, 1, 0)),  # the same drafts, verified to 6 live and to 8 in replay
])
def test_cycles_agree_counts_equal_cycles_and_names_the_first_difference(live, replayed, expected):
    cycles = [[CycleRecord(b, a, c, verified=rest[0] if rest else 0) for b, a, c, *rest in side]
              for side in (live, replayed)]
    assert cycles_agree(*cycles) == expected
