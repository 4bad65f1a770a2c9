"""Verification by simulation with sequential stopping.

A plan is verified when its simulated TTFT P90 / P99 and TPOT P90 meet the SLA. Each of the three is
a statement about an exceedance share: at most 10% of requests with TTFT above the P90 target, 1%
above the P99 target, 10% of multi-token requests with TPOT above the TPOT target. The verifier
first simulates a quarter of the requests. When every share's confidence interval lies below its
allowance (clearly met), or one lies above (clearly missed), and the point estimates say the same,
it stops there; otherwise it simulates them all. The intervals are reported either way.

The interval of a share p observed over n requests: queueing makes neighbouring requests'
latencies correlated, so the spread comes from batch means (the n requests in BATCHES consecutive
batches, x_j the share in batch j):

    p_hat +- t(0.995, BATCHES-1) * s(x) / sqrt(BATCHES)

widened to at least the binomial rule of three, [max(0, p_hat - 3/n), p_hat + 3/n], so that a batch
of zero exceedances does not read as certainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pddplan.scenarios.scenario import Scenario
from pddplan.simulate.outputs import Sequential, ShareCheck
from pddplan.simulate.summary import WARMUP_FRACTION, Simulation, simulate

#: share of the requested simulation run first
FIRST_STAGE_SHARE = 0.25
#: the first stage is skipped below this many requests: too few for 1% tails
MIN_FIRST_STAGE = 2_000
#: consecutive batches for the batch-means interval
BATCHES = 20
#: two-sided 99% Student t quantile with BATCHES - 1 = 19 degrees of freedom
T_QUANTILE = 2.861


@dataclass(frozen=True)
class ShareInterval:
    """The share of requests over one SLA target, its 99% interval and what the SLA allows."""

    metric: str
    target_s: float
    allowed: float
    observed: float
    low: float
    high: float

    @property
    def clearly_met(self) -> bool:
        return self.high <= self.allowed

    @property
    def clearly_missed(self) -> bool:
        return self.low > self.allowed

    def to_output(self) -> ShareCheck:
        return ShareCheck(
            metric=self.metric,
            target_s=self.target_s,
            allowed_share=self.allowed,
            observed_share=self.observed,
            interval=[self.low, self.high],
        )


def share_interval(metric: str, values: np.ndarray, target_s: float, allowed: float) -> ShareInterval:
    """The share of `values` (in arrival order) above `target_s`, with its batch-means interval."""
    over = (values > target_s).astype(np.float64)
    n = len(over)
    if n == 0:
        return ShareInterval(metric, target_s, allowed, 0.0, 0.0, 1.0)
    observed = float(over.mean())
    batches = np.array_split(over, min(BATCHES, n))
    means = np.array([batch.mean() for batch in batches])
    half = T_QUANTILE * float(means.std(ddof=1)) / math.sqrt(len(means)) if len(means) > 1 else 1.0
    half = max(half, 3.0 / n)
    return ShareInterval(metric, target_s, allowed, observed, max(0.0, observed - half), min(1.0, observed + half))


def share_intervals(simulation: Simulation, scenario: Scenario) -> list[ShareInterval]:
    """The share over each SLA target of a finished simulation, warm-up excluded as in its summary."""
    sla = scenario.workload.sla
    table = simulation.table
    count = len(table.arrival_s)
    keep = np.arange(count) >= int(count * WARMUP_FRACTION)
    ttft = table.ttft_s[keep]
    tpot = table.tpot_s[keep][table.output_tokens[keep] > 1]
    values = {"ttft": ttft, "tpot": tpot}
    return [
        share_interval(t.key.removesuffix("_s"), values[t.metric], t.target_s, 1.0 - t.quantile) for t in sla.targets()
    ]


def verify(scenario: Scenario, requests: int, seed: int, early_stop: bool = True) -> Simulation:
    """Simulate `scenario` for verification, stopping after the first stage when it is conclusive.

    The summary gains `sequential`: the requests the decision rests on, whether it stopped early,
    and each SLA share's interval.
    """
    first = int(requests * FIRST_STAGE_SHARE)
    if early_stop and first >= MIN_FIRST_STAGE:
        staged = simulate(scenario, first, seed)
        intervals = share_intervals(staged, scenario)
        met = all(interval.clearly_met for interval in intervals)
        missed = any(interval.clearly_missed for interval in intervals)
        if (met and staged.summary.sla_met) or (missed and not staged.summary.sla_met):
            return _with_decision(staged, intervals, requests, stopped_early=True)
    full = simulate(scenario, requests, seed)
    return _with_decision(full, share_intervals(full, scenario), requests, stopped_early=False)


def _with_decision(
    simulation: Simulation, intervals: list[ShareInterval], requested: int, stopped_early: bool
) -> Simulation:
    summary = simulation.summary.model_copy()
    summary.sequential = Sequential(
        requests_requested=requested,
        requests_simulated=summary.requests,
        stopped_early=stopped_early,
        shares=[interval.to_output() for interval in intervals],
    )
    return replace(simulation, summary=summary)
