"""WAN lines leased between two datacenters, pooled into one link.

Capacities add up; RTT, loss, TCP settings and fluctuation are those of the option with the
largest leased capacity (lines of one pair usually share a route). The per-flow cap is that
option's TCP bound on one of its lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pddplan.net.fluctuation import CapacityTrace, mean_fraction, stationary_support
from pddplan.net.tcp import flow_cap_bytes_per_s
from pddplan.specs.workload import Fluctuation, WanLineOption

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class LinePool:
    """Lines leased from `source` (prefill side) to `target` (decode side), pooled."""

    source: str
    target: str
    leases: tuple[tuple[WanLineOption, int], ...]
    capacity_bytes_per_s: float
    flow_cap_bytes_per_s: float
    rtt_s: float
    fluctuation: Fluctuation
    usd_per_hour: float
    trace: CapacityTrace | None = field(default=None, compare=False)  # loaded, for kind: trace

    @property
    def key(self) -> str:
        lines = "+".join(f"{count}x{option.name}" for option, count in self.leases)
        return f"{self.source}->{self.target}:{lines}"

    @property
    def gbps(self) -> float:
        return self.capacity_bytes_per_s * 8 / 1e9

    @property
    def lines(self) -> int:
        return sum(count for _, count in self.leases)

    def capacity_support(self) -> tuple[np.ndarray, np.ndarray]:
        """(available capacity in bytes/s, probability) of the stationary fluctuation."""
        fractions, probs = stationary_support(self.fluctuation, self.trace)
        return fractions * self.capacity_bytes_per_s, probs

    def mean_capacity_bytes_per_s(self) -> float:
        return self.capacity_bytes_per_s * mean_fraction(self.fluctuation, self.trace)


def pool_lines(
    source: str,
    target: str,
    leases: list[tuple[WanLineOption, int]],
    traces: Mapping[str, CapacityTrace] | None = None,
) -> LinePool:
    """Pool `leases` (option, count) into one link from `source` to `target`; `traces` holds the
    loaded capacity traces by file name (needed when the main option's fluctuation is a trace)."""
    main, _ = max(leases, key=lambda pair: pair[0].capacity_gbps * pair[1])
    return LinePool(
        source=source,
        target=target,
        leases=tuple(leases),
        capacity_bytes_per_s=sum(option.capacity_gbps * n for option, n in leases) * 1e9 / 8,
        flow_cap_bytes_per_s=flow_cap_bytes_per_s(
            main.tcp, main.rtt_ms / 1e3, main.loss_rate, main.capacity_gbps * 1e9 / 8
        ),
        rtt_s=main.rtt_ms / 1e3,
        fluctuation=main.fluctuation,
        usd_per_hour=sum(option.usd_per_month * n for option, n in leases) / HOURS_PER_MONTH,
        trace=(traces or {}).get(main.fluctuation.trace_file or ""),
    )
