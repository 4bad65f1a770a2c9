"""A plan's capacity view: how many requests/s each role's instances sustain within the SLA, which
role binds, and the fluid economics (what a request costs when every role runs at its SLA limit).

Per instance, within the SLA (see `pddplan.evaluate.capacity`):
  prefill   cap(n) / n, cap the largest rate a pool of the plan's n instances sustains with the
            TTFT targets met;
  decode    min(r / a, M / (a E[O] tau KV_seq + retention E[prompt KV])): compute (r requests/s of full
            outputs, a the share of output work done here) or radix-cache memory, whichever binds;
  relay     u* B*_R / E[hold per request] (Little's law);
  WAN       0.9 * E[available capacity] / E[bytes per request] for the plan's lines.
Plan capacity = min over roles of count * per-instance capacity. Fluid economics:
  gpus_per_rps = sum over roles of tp / per-instance capacity;
  cost_per_request = sum over roles of ($/h per instance) / (3600 * capacity) + ($/h of lines) / (3600 * WAN capacity);
  throughput per GPU-hour = 3600 / gpus_per_rps;  BCR = 1 / cost_per_request (requests per $);
  revenue per cost = revenue per request / cost per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pddplan.evaluate.analytic import revenue_per_request
from pddplan.evaluate.capacity import decoder_capacity, path_load, prefill_capacity
from pddplan.evaluate.classes import RequestClasses, request_classes
from pddplan.perf.kv import request_kv_bytes
from pddplan.scenario import Scenario
from pddplan.specs.plan import RoleName

UNBOUNDED_RATE = 1e9


@dataclass(frozen=True)
class CapacityView:
    """Capacities and fluid economics of one plan under one workload."""

    max_rate_rps: float
    bottleneck: str
    per_instance_rps: dict[str, float]
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
            "throughput_per_gpu_hour": self.throughput_per_gpu_hour,
            "cost_per_request_usd": self.cost_per_request_usd,
            "bcr": self.bcr,
            "revenue_per_request_usd": self.revenue_per_request_usd,
            "revenue_per_cost": self.revenue_per_cost,
            "margin_per_request_usd": self.margin_per_request_usd,
        }


def capacity_view(scenario: Scenario, classes: RequestClasses | None = None) -> CapacityView:
    """The capacity view of `scenario` (see the module docstring)."""
    workload, model, plan = scenario.workload, scenario.model, scenario.plan
    classes = classes or request_classes(scenario)
    outputs, p_out = classes.output_tokens, classes.output_prob
    mean_output = float(outputs @ p_out)
    context = classes.mean_context_tokens
    decode = decoder_capacity(scenario.decode, workload, model, context, mean_output)
    relay = decoder_capacity(scenario.relay, workload, model, context, mean_output) if scenario.relay else None
    md_step = decode.step_s
    relay_step = relay.step_s if relay is not None else md_step
    load = path_load(
        plan.architecture,
        classes,
        scenario.link,
        scenario.rate_rps,
        relay_step,
        [scenario.decode.instance],
        md_step,
        plan.handoff,
        context,
    )
    rates: dict[RoleName, float] = {}
    pool = prefill_capacity(
        scenario.prefill,
        classes,
        plan.architecture,
        scenario.link,
        md_step,
        relay_step,
        workload,
        np.array([scenario.prefill.count]),
        UNBOUNDED_RATE,
        1.0,
    )
    rates["prefill"] = float(pool[0]) / scenario.prefill.count
    compute = decode.requests_per_s / max(load.md_load_fraction, 1e-12) if decode.usable else 0.0
    drc_per_rps = 0.0
    if plan.architecture != "pd-intra":
        prompts, probs = workload.prompt_tokens.support()
        prompt_kv = float(request_kv_bytes(model, prompts, workload.serving.page_tokens) @ probs)
        drc_per_rps = workload.serving.drc_retention_s * prompt_kv
    memory = decode.memory_bytes / decode.memory_per_rps(load.md_load_fraction * mean_output, drc_per_rps)
    rates["decode"] = min(compute, memory)
    if relay is not None and scenario.relay is not None:
        rates["relay"] = relay.occupancy / load.relay_hold_s if load.relay_hold_s > 0 else math.inf
    totals: dict[str, float] = {name: scenario.roles[name].count * rate for name, rate in rates.items()}
    if scenario.link is not None:
        totals["wan"] = load.max_rate
    bottleneck = min(totals, key=lambda name: totals[name])
    gpus_per_rps = 0.0
    cost_per_second = 0.0
    for name, rate in rates.items():
        role = scenario.roles[name]
        gpus_per_rps += role.tp / rate if rate > 0 else math.inf
        cost_per_second += role.usd_per_hour / role.count / rate if rate > 0 else math.inf
    if scenario.link is not None:
        cost_per_second += scenario.link.usd_per_hour / load.max_rate if load.max_rate > 0 else math.inf
    cost_per_request = cost_per_second / 3600.0
    revenue = revenue_per_request(scenario, classes)
    return CapacityView(
        max_rate_rps=float(totals[bottleneck]),
        bottleneck=bottleneck,
        per_instance_rps={str(name): rate for name, rate in rates.items()},
        throughput_per_gpu_hour=3600.0 / gpus_per_rps if gpus_per_rps > 0 else 0.0,
        cost_per_request_usd=cost_per_request,
        bcr=1.0 / cost_per_request if cost_per_request > 0 else 0.0,
        revenue_per_request_usd=revenue,
        revenue_per_cost=revenue / cost_per_request if cost_per_request > 0 else 0.0,
        margin_per_request_usd=revenue - cost_per_request,
    )
