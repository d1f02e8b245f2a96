"""bench verify: (B, L) replay agrees with live decoding for policies with verify rules."""

from __future__ import annotations

from benchmarks.verify import bench_verify
from specpolicy.costs import uniform_costs
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
