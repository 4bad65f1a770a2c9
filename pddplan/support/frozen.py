"""Arrays made read-only: a result kept and handed to every caller that asks the same must not
be changed by one of them for the others."""

from __future__ import annotations

import numpy as np


def read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """`arrays`, each marked read-only (numpy refuses a write to them), returned as given."""
    for array in arrays:
        array.flags.writeable = False
    return arrays
