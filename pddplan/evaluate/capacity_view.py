"""A plan's capacity view: how many requests/s each role's instances sustain within the SLA, which
role binds, and the fluid economics (what a request costs when every role runs at its SLA limit).

Per instance, within the SLA (see `pddplan.evaluate.capacity`):
  prefill   cap(n) / n, cap the largest rate a pool of the plan's n instances sustains with the
            TTFT targets met;
  decode    min(r / a, M / (a E[O] tau KV_seq + retention E[prompt KV])): compute (r requests/s of
            full outputs, a the share of output work done here) or memory (running KV and radix
            cache), whichever binds;
  relay     u* B*_R / E[hold per request] (Little's law);
  WAN       0.9 * E[available capacity] / E[bytes per request] for the plan's lines.
Plan capacity = min over roles of count * per-instance capacity. Fluid economics:
  gpus_per_rps = sum over roles of tp / per-instance capacity;
  cost_per_request = (sum over roles of $/h per instance / capacity + $/h of lines / WAN capacity) / 3600;
  throughput per GPU-hour = 3600 / gpus_per_rps;  BCR = 1 / cost_per_request (requests per $);
  revenue per cost = revenue per request / cost per request;
  prefill tokens per GPU-second = E[new tokens] / E[prefill time] / tp (service physics, no queue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pddplan.evaluate.analytic import revenue_per_request
from pddplan.evaluate.capacity import DecoderCapacity, K, PathLoad, decoder_capacity, path_load, prefill_capacity
from pddplan.evaluate.classes import RequestClasses, request_classes
from pddplan.scenario import Scenario, drc_bytes_per_rps

UNBOUNDED_RATE = 1e9


@dataclass(frozen=True)
class CapacityView:
    """Capacities and fluid economics of one plan under one workload."""

    max_rate_rps: float
    bottleneck: str
    per_instance_rps: dict[str, float]
    prefill_tokens_per_gpu_s: float
    throughput_per_gpu_hour: float
    cost_per_request_usd: float
    bcr: float
    revenue_per_request_usd: float
    revenue_per_cost: float
    margin_per_request_usd: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rate_rps": self.max_rate_rps,
            "bottleneck": self.bottleneck,
            "per_instance_rps": self.per_instance_rps,
            "prefill_tokens_per_gpu_s": self.prefill_tokens_per_gpu_s,
            "throughput_per_gpu_hour": self.throughput_per_gpu_hour,
            "cost_per_request_usd": self.cost_per_request_usd,
            "bcr": self.bcr,
            "revenue_per_request_usd": self.revenue_per_request_usd,
            "revenue_per_cost": self.revenue_per_cost,
            "margin_per_request_usd": self.margin_per_request_usd,
        }


def decoder_rate(cap: DecoderCapacity[K], load: PathLoad, mean_output: float, drc: float) -> float:
    """Requests/s one decode instance carries: compute or memory, whichever binds (0 if unusable)."""
    if not cap.usable:
        return 0.0
    compute = cap.requests_per_s / max(load.md_load_fraction, 1e-12)
    memory = cap.memory_bytes / cap.memory_per_rps(load.md_load_fraction * mean_output, drc)
    return min(compute, memory)


def relay_rate(cap: DecoderCapacity[K], load: PathLoad) -> float:
    """Requests/s (of all traffic) one relay instance carries: u* B*_R / E[hold per request]."""
    return cap.occupancy / load.relay_hold_s if load.relay_hold_s > 0 else math.inf


def fluid_view(
    rates: dict[str, float],
    counts: dict[str, int],
    tp: dict[str, int],
    usd_per_instance_hour: dict[str, float],
    wan_rate: float | None,
    wan_usd_per_hour: float,
    revenue: float,
    prefill_tokens_per_gpu_s: float,
) -> CapacityView:
    """Bottleneck and fluid economics from per-instance capacities (the module docstring's formulas)."""
    totals = {name: counts[name] * rate for name, rate in rates.items()}
    if wan_rate is not None:
        totals["wan"] = wan_rate
    bottleneck = min(totals, key=lambda name: totals[name])
    gpus_per_rps = 0.0
    cost_per_second = 0.0
    for name, rate in rates.items():
        gpus_per_rps += tp[name] / rate if rate > 0 else math.inf
        cost_per_second += usd_per_instance_hour[name] / rate if rate > 0 else math.inf
    if wan_rate is not None:
        cost_per_second += wan_usd_per_hour / wan_rate if wan_rate > 0 else math.inf
    cost = cost_per_second / 3600.0
    return CapacityView(
        max_rate_rps=float(totals[bottleneck]),
        bottleneck=bottleneck,
        per_instance_rps=dict(rates),
        prefill_tokens_per_gpu_s=prefill_tokens_per_gpu_s,
        throughput_per_gpu_hour=3600.0 / gpus_per_rps if gpus_per_rps > 0 else 0.0,
        cost_per_request_usd=cost,
        bcr=1.0 / cost if cost > 0 else 0.0,
        revenue_per_request_usd=revenue,
        revenue_per_cost=revenue / cost if cost > 0 else 0.0,
        margin_per_request_usd=revenue - cost,
    )


def capacity_view(scenario: Scenario, classes: RequestClasses | None = None) -> CapacityView:
    """The capacity view of `scenario` (see the module docstring)."""
    workload, model, plan = scenario.workload, scenario.model, scenario.plan
    classes = classes or request_classes(scenario)
    mean_output = classes.mean_output_tokens
    context = classes.mean_context_tokens
    decode = decoder_capacity(scenario.decode, workload, model, context, mean_output)
    relay = decoder_capacity(scenario.relay, workload, model, context, mean_output) if scenario.relay else None
    relay_step = relay.step_s if relay is not None else decode.step_s
    load = path_load(
        plan.architecture,
        classes,
        scenario.link,
        scenario.rate_rps,
        relay_step,
        [scenario.decode.instance],
        decode.step_s,
        plan.handoff,
        context,
    )
    pool = prefill_capacity(
        scenario.prefill,
        classes,
        plan.architecture,
        scenario.link,
        decode.step_s,
        relay_step,
        workload,
        np.array([scenario.prefill.count]),
        UNBOUNDED_RATE,
        1.0,
    )
    rates = {
        "prefill": float(pool[0]) / scenario.prefill.count,
        "decode": decoder_rate(decode, load, mean_output, drc_bytes_per_rps(workload, model, plan.architecture)),
    }
    if relay is not None:
        rates["relay"] = relay_rate(relay, load)
    roles = scenario.roles
    return fluid_view(
        rates,
        {name: roles[name].count for name in rates},  # type: ignore[index]
        {name: roles[name].tp for name in rates},  # type: ignore[index]
        {name: roles[name].usd_per_hour / roles[name].count for name in rates},  # type: ignore[index]
        load.max_rate if scenario.link is not None else None,
        scenario.link.usd_per_hour if scenario.link is not None else 0.0,
        revenue_per_request(workload, classes),
        prefill_token_throughput(classes, scenario.prefill.tp),
    )


def prefill_token_throughput(classes: RequestClasses, tp: int) -> float:
    """New tokens a prefill GPU processes per second when busy: E[new tokens] / E[prefill time] / tp.

    The step-time physics alone, before queueing: a small tail chunk pays a whole step (weights,
    overheads) for few tokens, which shows here as a dip just before each hit rate where the
    tail chunk vanishes."""
    mean_s = float(classes.prefill_s @ classes.input_prob)
    return float(classes.new_tokens @ classes.input_prob) / mean_s / tp if mean_s > 0 else 0.0
