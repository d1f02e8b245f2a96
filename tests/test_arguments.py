"""The contract's one checks of a candidate set and of a verify length (table-driven)."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.arguments import check_candidate_set, check_verify_length


@pytest.mark.parametrize(("candidates", "expected"), [
    ([16], (16,)),
    ([18, 14, 16], (14, 16, 18)),
    ((1, 64), (1, 64)),
    (np.array([4, 2]), (2, 4)),
])
def test_check_candidates_sorts_valid_sets(candidates, expected):
    assert check_candidate_set(candidates) == expected


@pytest.mark.parametrize(("candidates", "message"), [
    ([], "must name distinct block sizes"),
    ([4, 4], "none may repeat"),
    ([0, 4], "block size must be an integer in 1..64"),
    ([16, 65], "got 65"),
    ([2.5], "got 2.5"),
    ([True, 2], "got True"),
])
def test_check_candidates_refuses_bad_sets_naming_the_option(candidates, message):
    with pytest.raises(ValueError, match=message) as raised:
        check_candidate_set(candidates, "--candidates")
    assert str(raised.value).startswith("--candidates")


@pytest.mark.parametrize(("length", "block", "cap", "expected"), [
    (None, 8, False, 8),
    (1, 8, False, 1),
    (8, 8, False, 8),
    (12, 8, True, 8),
    (np.int64(3), 8, False, 3),
])
def test_check_verify_length(length, block, cap, expected):
    assert check_verify_length(length, block, cap) == expected


@pytest.mark.parametrize(("length", "block", "cap"),
                         [(0, 8, False), (9, 8, False), (65, 8, True), (True, 8, False),
                                                      (2.0, 8, False)])
def test_check_verify_length_refuses(length, block, cap):
    with pytest.raises(ValueError, match="verify length must be an integer"):
        check_verify_length(length, block, cap)
