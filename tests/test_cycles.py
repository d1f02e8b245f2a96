"""The one rule two decodes agree by (table-driven)."""

from __future__ import annotations

import pytest

from specpolicy.cycles import CycleRecord
from specpolicy.evaluation.metrics import cycles_agree


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
