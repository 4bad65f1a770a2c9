"""Cache capacity as a priced decision (`pddplan cache-plan`): how much prefix cache to buy along
with the GPUs and lines, from a trace.

An outer search over the capacities offered: at each capacity C the trace's hits are replayed
through a prefix cache of C (`workload_from_trace`), the deployment is optimized for that traffic
(`pddplan.optimize`, every architecture), and the cache is priced at `usd_per_gb_month` x C /
HOURS_PER_MONTH. The best capacity maximizes goodput per dollar of GPUs, lines and cache together
(or minimizes their cost for `--rate`). Between neighbouring capacities the marginal value of
cache is the GPU-and-line $/h it saves per $/h it costs:
    value(C1 -> C2) = (G(C1) - G(C2)) / (cache(C2) - cache(C1)),
above 1 when the step pays for itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from pddplan.errors import InputError
from pddplan.inputs import load_workload, workload_dir, workload_model
from pddplan.optimize.command import architecture_names
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import headline, optimize_variants
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.specs.workload import Workload
from pddplan.support.limits import check_rate
from pddplan.support.outputs import Output
from pddplan.trace.curve import Capacity, parse_capacities
from pddplan.trace.read import TraceFormat, hashed_format
from pddplan.trace.workload import CacheChoice, workload_from_trace


class CachePlanPoint(Output):
    capacity: str = Field(description="as given: bytes (100GB) or tokens (5M)")
    capacity_bytes: float
    hit_token_weighted: float = Field(description="cached share of prompt tokens at this capacity")
    architecture: str | None = Field(description="the best feasible architecture (null: none)")
    gpu_and_line_usd_per_hour: float | None
    cache_usd_per_hour: float
    total_usd_per_hour: float | None
    goodput_rps: float
    bcr: float | None = Field(description="goodput per dollar of GPUs, lines and cache (requests / $)")
    marginal_value: float | None = Field(
        description="GPU-and-line $/h saved per $/h of cache added since the previous capacity"
    )


class CachePlan(Output):
    """`cache-plan --json`."""

    trace: str
    workload: str
    usd_per_gb_month: float
    mode: str
    points: list[CachePlanPoint]
    best_capacity: str | None


HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class CachePoint:
    """The best deployment for the trace's traffic at one cache capacity, with its price."""

    capacity: Capacity
    capacity_bytes: float
    hit_token_weighted: float
    architecture: str | None
    gpu_and_line_usd_per_hour: float | None
    cache_usd_per_hour: float
    goodput_rps: float

    @property
    def total_usd_per_hour(self) -> float | None:
        if self.gpu_and_line_usd_per_hour is None:
            return None
        return self.gpu_and_line_usd_per_hour + self.cache_usd_per_hour

    @property
    def bcr(self) -> float | None:
        """Goodput per dollar of GPUs, lines and cache: requests / $."""
        total = self.total_usd_per_hour
        return self.goodput_rps * 3600 / total if total else None

    def to_output(self, marginal_value: float | None) -> CachePlanPoint:
        """The point as `--json` prints it, with the marginal value of the step to it."""
        return CachePlanPoint(
            capacity=self.capacity.text,
            capacity_bytes=self.capacity_bytes,
            hit_token_weighted=self.hit_token_weighted,
            architecture=self.architecture,
            gpu_and_line_usd_per_hour=self.gpu_and_line_usd_per_hour,
            cache_usd_per_hour=self.cache_usd_per_hour,
            total_usd_per_hour=self.total_usd_per_hour,
            goodput_rps=self.goodput_rps,
            bcr=self.bcr,
            marginal_value=marginal_value,
        )


def token_weighted_hit(workload: Workload) -> float:
    """Cached share of prompt tokens: sum p_i h_i P_i / sum p_i P_i over the (prompt, hit) classes."""
    prompt, hit, prob = workload.prompt_hit_support()
    weight = prompt * prob
    return float(np.sum(weight * hit) / np.sum(weight))


def marginal_values(points: list[CachePoint]) -> list[float | None]:
    """value(C_{i-1} -> C_i) for each point after the first (None where a side has no plan or the
    cache costs nothing more); the module docstring gives the formula."""
    out: list[float | None] = [None]
    for low, high in itertools.pairwise(points):
        extra_cache = high.cache_usd_per_hour - low.cache_usd_per_hour
        if low.gpu_and_line_usd_per_hour is None or high.gpu_and_line_usd_per_hour is None or extra_cache <= 0:
            out.append(None)
            continue
        out.append((low.gpu_and_line_usd_per_hour - high.gpu_and_line_usd_per_hour) / extra_cache)
    return out


@dataclass(frozen=True)
class Traffic:
    """The trace whose traffic is served, and the workload it is served on (read from `base_dir`)."""

    trace: Path
    fmt: Any
    template: Workload
    base_dir: Path


def cache_plan(
    traffic: Traffic,
    capacities: list[Capacity],
    usd_per_gb_month: float,
    options: OptimizeOptions,
    architectures: list[str] | None = None,
    progress: Any = None,
) -> list[CachePoint]:
    """The best deployment at each capacity (module docstring), in the order given."""
    template = traffic.template

    if not (usd_per_gb_month >= 0 and np.isfinite(usd_per_gb_month)) or usd_per_gb_month > 1e4:
        raise InputError(f"--usd-per-gb-month = {usd_per_gb_month}: expected 0 to 10,000 $ per GB-month")

    kv = kv_bytes_per_token(workload_model(template))
    built = []
    for capacity in capacities:
        if progress:
            progress(f"cache {capacity.text}: replaying the trace...")
        choice = CacheChoice(f"{capacity.tokens:.0f} tokens")
        built.append(workload_from_trace(traffic.trace, traffic.fmt, template, choice).workload)
    if progress:
        progress(f"optimizing the deployment at {len(capacities)} cache capacities...")
    # one pool of workers for every (capacity, architecture) search: no core idles while the last
    # architecture of one capacity finishes (the same reports as one capacity at a time)
    reports = optimize_variants([(workload, options) for workload in built], traffic.base_dir, architectures)
    points = []
    for capacity, workload, report in zip(capacities, built, reports, strict=True):
        size_bytes = capacity.capacity_bytes if capacity.capacity_bytes is not None else capacity.tokens * kv
        best = report.best
        figures = headline(best) if best is not None else None
        points.append(
            CachePoint(
                capacity=capacity,
                capacity_bytes=size_bytes,
                hit_token_weighted=token_weighted_hit(workload),
                architecture=best.name if best is not None else None,
                gpu_and_line_usd_per_hour=figures.cost_usd_per_hour if figures else None,
                cache_usd_per_hour=size_bytes / 1e9 * usd_per_gb_month / HOURS_PER_MONTH,
                goodput_rps=figures.goodput_rps if figures else 0.0,
            )
        )
    return points


def cache_price(workload: Workload, given: float | None) -> float:
    """$ per GB-month of prefix cache: `given`, else the workload's `deployment.prefix_cache`;
    InputError when neither says (pddplan ships no cache price: none is sourced)."""
    if given is not None:
        return given
    offer = workload.deployment.prefix_cache
    if offer is None:
        raise InputError(
            f"no cache price: give --usd-per-gb-month or set deployment.prefix_cache in workload {workload.name} "
            "(pddplan ships none)"
        )
    return offer.usd_per_gb_month


def best_point(points: list[CachePoint], mode: str) -> CachePoint | None:
    """Highest BCR, or the lowest total cost for `--rate`, among capacities with a plan."""
    planned = [p for p in points if p.total_usd_per_hour is not None]
    if not planned:
        return None
    if mode == "rate":
        return min(planned, key=lambda p: p.total_usd_per_hour or 0.0)
    return max(planned, key=lambda p: p.bcr or 0.0)


@dataclass(frozen=True)
class CachePlanRequest:
    """What `cache-plan` is asked: the trace's traffic on the workload, the capacities to price, the
    cache's price, the optimize options (the mode) and the architectures (None: all)."""

    traffic: Traffic
    capacities: list[Capacity]
    usd_per_gb_month: float
    options: OptimizeOptions
    architectures: list[str] | None = None


@dataclass(frozen=True)
class CacheOutcome:
    """What `cache-plan` found: the best deployment at each capacity asked for."""

    request: CachePlanRequest
    points: list[CachePoint]

    @property
    def best(self) -> CachePoint | None:
        """The best capacity (`best_point`), None when no capacity has a plan."""
        return best_point(self.points, self.request.options.mode)

    def to_output(self) -> CachePlan:
        """The typed result `--json` prints: the points, each with the marginal value of the step to
        it, and the best capacity."""
        best, request = self.best, self.request
        values = marginal_values(self.points)
        return CachePlan(
            trace=str(request.traffic.trace),
            workload=request.traffic.template.name,
            usd_per_gb_month=request.usd_per_gb_month,
            mode=request.options.mode,
            points=[p.to_output(v) for p, v in zip(self.points, values, strict=True)],
            best_capacity=best.capacity.text if best is not None else None,
        )


@dataclass(frozen=True)
class CachePlanFlags:
    """Every option of `pddplan cache-plan`, by the command's parameter names; the format and the
    rate are checked when the flags are made, the rest when they become a request (`request`)."""

    trace: Path
    like: str
    capacity: str
    usd_per_gb_month: float | None = None
    architecture: list[str] | None = None
    rate: float | None = None
    fmt: str = "mooncake"
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for a format without block hashes, then for an unknown architecture, then
        for a rate out of bounds."""
        hashed_format(self.fmt, "--format")
        architecture_names(self.architecture)
        if self.rate is not None:
            check_rate(self.rate)

    @property
    def trace_format(self) -> TraceFormat:
        """The checked `--format`."""
        return hashed_format(self.fmt, "--format")

    def request(self) -> CachePlanRequest:
        """The request these options ask for, checked before any replay: the workload read, the
        cache priced (`cache_price`), the capacities read with its model's KV bytes per token; the
        cheapest plan at the rate when one is given, else the best BCR."""
        template = load_workload(self.like)
        price = cache_price(template, self.usd_per_gb_month)
        capacities = parse_capacities(self.capacity, kv_bytes_per_token(workload_model(template)))
        options = OptimizeOptions(mode="rate", rate=self.rate) if self.rate is not None else OptimizeOptions()
        traffic = Traffic(self.trace, self.trace_format, template, workload_dir(self.like))
        return CachePlanRequest(traffic, capacities, price, options, self.architecture)


def run_request(request: CachePlanRequest, progress: Callable[[str], None] | None = None) -> CacheOutcome:
    """The best deployment at each capacity of `request` (`cache_plan`)."""
    points = cache_plan(
        request.traffic,
        request.capacities,
        request.usd_per_gb_month,
        request.options,
        request.architectures,
        progress=progress,
    )
    return CacheOutcome(request, points)
