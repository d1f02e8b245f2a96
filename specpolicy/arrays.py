"""The one crossing from tensors to numpy (no torch import): any device, any dtype, to a host array."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(value: Any) -> np.ndarray:
    """``value`` as a numpy array on the host: tensors are detached and moved to the CPU (floating ones
    become float32, so bfloat16 converts); arrays and sequences pass through ``np.asarray``."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        return (tensor.float() if tensor.is_floating_point() else tensor).numpy()
    return np.asarray(value)
