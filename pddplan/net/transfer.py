"""Closed-form WAN transfer time under processor sharing with a per-flow cap.

With offered load L bytes/s on a line whose available capacity is C f, a transfer gets on average
min(F, C f - L) bytes/s (M/G/1-PS gives C f (1 - rho) = C f - L; TCP caps a flow at F), the spare
capacity floored at 5% of C f so a momentarily saturated line still drains. Its time is the
one-way latency plus the size over that rate:
    T(x, f) = RTT / 2 + x / min(F, max(C f - L, 0.05 C f)).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

SPARE_FLOOR = 0.05


def wan_transfer_time(
    size_bytes: ArrayLike,
    capacity_bytes_per_s: ArrayLike,
    offered_bytes_per_s: ArrayLike,
    flow_cap_bytes_per_s: ArrayLike,
    rtt_s: ArrayLike,
) -> np.ndarray:
    """T(x, f) for every combination: sizes along axis -2, capacity points along axis -1.

    `offered_bytes_per_s` and `flow_cap_bytes_per_s` broadcast against the capacity points (e.g.
    one load per pool size), `rtt_s` against the result (e.g. shape (lines, 1, 1) for one row of
    capacity points per line). An infinite capacity (no line) takes no time beyond RTT / 2.
    """
    capacity = np.asarray(capacity_bytes_per_s, dtype=np.float64)
    spare = np.maximum(capacity - np.asarray(offered_bytes_per_s, dtype=np.float64), SPARE_FLOOR * capacity)
    rate = np.minimum(flow_cap_bytes_per_s, spare)
    size = np.asarray(size_bytes, dtype=np.float64)
    return np.asarray(rtt_s, dtype=np.float64) / 2 + size[..., :, None] / rate[..., None, :]
