"""The SLA verdict and the money, in one place for `evaluate` and `simulate`.

Both report the same keys with the same meaning:
  sla_violations   each percentile over its target ("TTFT P90 12.30 s > 10 s"), after any
                   instability (a queue that grows without bound);
  sla_met          no violation;
  goodput_rps      the served rate when the SLA holds; otherwise rate x attainment, the share of
                   requests that individually meet TTFT <= the P99 target and TPOT <= the TPOT target;
  revenue_per_hour goodput x revenue per request x 3600: what the requests served within the SLA pay;
  bcr              goodput requests per dollar: goodput x 3600 / cost per hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pddplan.specs.workload import Sla, Workload

if TYPE_CHECKING:
    from pddplan.evaluate.classes import RequestClasses


@dataclass(frozen=True)
class Tails:
    """The percentiles an SLA may name (seconds): TTFT and TPOT at P50, P90 and P99."""

    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float

    @classmethod
    def of(cls, ttft: Sequence[float] | np.ndarray, tpot: Sequence[float] | np.ndarray) -> Tails:
        """From (P50, P90, P99) of TTFT and of TPOT."""
        return cls(*(float(v) for v in ttft), *(float(v) for v in tpot))


@dataclass(frozen=True)
class Verdict:
    """SLA, goodput and money of one deployment at one rate."""

    violations: list[str]
    goodput_rps: float
    revenue_per_hour: float
    bcr: float

    @property
    def sla_met(self) -> bool:
        return not self.violations


def sla_violations(sla: Sla, tails: Tails) -> list[str]:
    """Each SLA percentile over its target, as a sentence (TTFT in s, TPOT in ms)."""
    out = []
    for target in sla.targets():
        value = getattr(tails, target.key)
        if value > target.target_s:
            if target.metric == "ttft":
                out.append(f"{target.name} {value:.2f} s > {target.target_s:g} s")
            else:
                out.append(f"{target.name} {value * 1e3:.1f} ms > {target.target_s * 1e3:g} ms")
    return out


def judge(
    sla: Sla,
    tails: Tails,
    rate_rps: float,
    attainment: float,
    economics: tuple[float, float],
    instability: str | None = None,
) -> Verdict:
    """The verdict (module docstring); `economics` = ($ revenue per request, $ cost per hour)."""
    revenue_per_request_usd, cost_per_hour = economics
    violations = ([instability] if instability else []) + sla_violations(sla, tails)
    goodput = rate_rps if not violations else rate_rps * attainment
    return Verdict(
        violations=violations,
        goodput_rps=goodput,
        revenue_per_hour=goodput * revenue_per_request_usd * 3600,
        bcr=goodput * 3600 / cost_per_hour if cost_per_hour > 0 else 0.0,
    )


def revenue_per_request(workload: Workload, classes: RequestClasses) -> float:
    """Mean $ a request pays: uncached input, cached input (discounted) and output tokens,
    E[new x p_in + cached x p_cached] + E[O] x p_out (prices per token)."""
    prices = workload.prices
    input_usd = (
        classes.new_tokens * prices.input_usd_per_mtok + classes.cached_tokens * prices.cached_input_usd_per_mtok
    ) / 1e6
    return float(input_usd @ classes.input_prob + classes.mean_output_tokens * prices.output_usd_per_mtok / 1e6)


def tpot_target(sla: Sla) -> float:
    """The TPOT a request must keep to count toward goodput (`Sla.tpot_per_request_s`)."""
    return sla.tpot_per_request_s()
