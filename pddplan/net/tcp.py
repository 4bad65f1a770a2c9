"""Throughput of one KV transfer over TCP on a WAN line, and of an RDMA copy inside a datacenter.

Per TCP stream, the rate is bounded by its window and, under loss, by the Mathis et al. (1997)
bound:
    window bound   rate <= W / RTT
    Mathis bound   rate <= (MSS / RTT) * sqrt(3/2) / sqrt(p)          (Reno/CUBIC-like, p < ~1%)
BBR does not back off on random loss below ~15%; its stream is bounded by the window and by
C * (1 - p). A transfer opens `streams` parallel streams, so its flow rate is
    streams * min(window bound, loss bound),
and flows on one line share its capacity (processor sharing, see `pddplan.net.transfer`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from pddplan.specs.workload import TcpSpec

MATHIS_CONSTANT = math.sqrt(1.5)
#: GPU memory-copy overhead of the RDMA path, measured by the article's 100-token microbenchmark.
RDMA_COPY_OVERHEAD_S = 0.0245


def mathis_bytes_per_s(mss_bytes: float, rtt_s: float, loss_rate: float) -> float:
    """Loss-limited TCP rate of one stream: (MSS / RTT) * sqrt(3/2) / sqrt(p); infinite at p = 0."""
    if loss_rate <= 0:
        return math.inf
    return mss_bytes / rtt_s * MATHIS_CONSTANT / math.sqrt(loss_rate)


def window_bytes_per_s(window_bytes: float, rtt_s: float) -> float:
    """Window-limited rate of one stream: W / RTT."""
    return window_bytes / rtt_s


def flow_cap_bytes_per_s(tcp: TcpSpec, rtt_s: float, loss_rate: float, line_bytes_per_s: float) -> float:
    """The most one transfer (all its streams) can get on an idle line, in bytes/s."""
    per_stream = window_bytes_per_s(tcp.window_bytes, rtt_s)
    if tcp.congestion == "cubic":
        per_stream = min(per_stream, mathis_bytes_per_s(tcp.mss_bytes, rtt_s, loss_rate))
    else:
        per_stream = min(per_stream, line_bytes_per_s * (1.0 - loss_rate))
    return min(tcp.streams * per_stream, line_bytes_per_s)


def rdma_time_s(payload_bytes: ArrayLike, gpus: int, nic_bytes_per_s: float) -> np.ndarray:
    """RDMA copy of a KV payload from a prefill instance: bytes / (gpus * NIC) + copy overhead.

    Each sending GPU sends its part through its own NIC, so their NICs add up; `gpus` is the
    instance's `kv_senders` (every GPU, tp x pp, under tensor-parallel attention, 1 under data-parallel
    attention).
    """
    return np.asarray(payload_bytes, dtype=np.float64) / (gpus * nic_bytes_per_s) + RDMA_COPY_OVERHEAD_S
