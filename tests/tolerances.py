"""How close two values computed on different machines must be: the one place tests state it.

Another CPU (vendor, SIMD width, thread count) may round a matrix product differently, so a value a
model computed here is compared with a tolerance; only what is computed from integers (tokens,
acceptance counts, replay tables) is compared exactly.
"""

from __future__ import annotations

import numpy as np

FLOAT16_RTOL = 5e-3
"""relative tolerance for model outputs stored as float16 (drafter confidences, entropies): a few steps"""
FLOAT16_ATOL = 5e-4
"""absolute tolerance beside it, for values near 0 (half a float16 step at 1.0)"""


def assert_float16_rows_close(ours: dict[int, np.ndarray], theirs: dict[int, np.ndarray], what: str) -> None:
    """Block size -> [n, B - 1] float16 values, computed on two machines: equal within the tolerance above,
    NaN (not drafted) only where the other has NaN."""
    assert ours.keys() == theirs.keys(), what
    for size in ours:
        np.testing.assert_allclose(ours[size], theirs[size], rtol=FLOAT16_RTOL, atol=FLOAT16_ATOL,
                                   equal_nan=True,
                                   err_msg=f"{what} at block size {size}")
