"""`pddplan bathtub`: benefit against prefix-hit rate, per architecture, with what the curve says.

At each hit rate h the workload's hit distribution is replaced (`fixed`: every request hits h;
`shift`: the whole distribution is moved so its mean is h, shape kept: hits x -> x + (1 - x) s above
the original mean, x -> x h / mean below). Each architecture's plan is sized for the workload's rate
(`pddplan.optimize.sizing`, instance kinds chosen once at the workload's own hit rate; PDD relays by
incremental bytes so the rule means the same at every h):

- by default (`fixed_plan`) once, at the workload's own hit rate, and the deployment stays while
  the hit rate moves: the article's question, what a deployment earns as its hit rate changes;
- with `fixed_plan=False` (`--resize`) again at every h.

At each h the plan's capacity view there (`pddplan.evaluate.capacity_view`) gives the rate it
serves, min(offered rate, plan capacity at h), on its whole instances and lines, priced as such:
BCR = served * 3600 / cost per hour, revenue per cost = served * revenue per request * 3600 / cost,
margin = that revenue - cost, throughput per GPU-hour = served * 3600 / GPUs.

Nothing is shaped by hand. Prefill throughput comes two ways: packed (chunked prefill fills each
step with the next requests' tokens, as engines do under load) and alone (one request at a time, as
on an idle instance); the tail-chunk dips (a small tail chunk pays a whole step for few tokens) are
looked for in both, and appear only alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from pddplan import architectures as registry
from pddplan.architectures.pdd import relay_by_bytes
from pddplan.errors import InfeasibleError, InputError
from pddplan.evaluate.capacity_view import capacity_view
from pddplan.inputs import load_workload, workload_dir, workload_model
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.optimize.command import architecture_names
from pddplan.optimize.sizing import Shape, choose_shape, relay_on_prefill_if_cheaper, size_plan
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.scenarios.scenario import build_scenario
from pddplan.scenarios.variants import HitMode, at_hit
from pddplan.specs.plan import ArchitectureName, Plan
from pddplan.specs.workload import Workload
from pddplan.support.curve_shape import curve_shape, local_minima
from pddplan.support.distribute import Execution, map_in_order
from pddplan.support.images import check_image_outputs
from pddplan.support.limits import check_chunk, check_points
from pddplan.support.outputs import Output
from pddplan.trace.bathtub_marks import trace_marks


class Bathtub(Output):
    """`bathtub --json`: per hit point, each architecture's figures under its name."""

    workload: str
    mode: str
    fixed_plan: bool
    chunk_tokens: int
    rate_rps: float
    architectures: list[str]
    points: list[dict[str, Any]]
    findings: dict[str, Any]
    trace: dict[str, Any] | None = Field(
        default=None,
        description="with --trace: the trace's hit per cache size (GB), its unbounded hit, and per architecture "
        "with a valley the cache size that climbs out",
    )


VALLEY_DEPTH = 0.05  # a valley: an interior minimum at least 5% below both rims


def tail_chunk_tokens(prompt_tokens: float, hit: float, chunk_tokens: int, page_tokens: int) -> int:
    """Size of the last prefill chunk: new tokens mod chunk (a full chunk when it divides evenly)."""
    cached = min(math.floor(hit * prompt_tokens / page_tokens) * page_tokens, prompt_tokens - 1)
    new = int(prompt_tokens - cached)
    if new <= 0:
        return 0
    tail = new % chunk_tokens
    return tail if tail else chunk_tokens


def predicted_dips(prompt_tokens: float, chunk_tokens: int, page_tokens: int) -> list[float]:
    """Hit rates just past which a new, nearly empty tail chunk appears: new tokens = k * chunk,
    i.e. h_k = 1 - k * C / P for k = 1, 2, ... (the arithmetic a chunk size predicts)."""
    out = []
    k = 1
    while k * chunk_tokens < prompt_tokens:
        out.append(1.0 - k * chunk_tokens / prompt_tokens)
        k += 1
    return sorted(out)


@dataclass(frozen=True)
class BathtubOptions:
    """How to sweep: the hit distribution at each point (`mode`), how many points, the chunk
    size (default: the workload's), and whether each plan stays as sized at the workload's own hit
    rate (`fixed_plan`, the default: the article's question, what a deployment earns as its hit
    rate moves) or is re-sized per point."""

    mode: HitMode = "fixed"
    points: int = 101
    chunk_tokens: int | None = None
    fixed_plan: bool = True
    #: where the points run (`pddplan.support.distribute`); None: forked workers, one per CPU
    execution: Execution | None = None


@dataclass
class BathtubResult:
    """Per hit point and architecture: figures and the sized plan; findings."""

    workload: Workload
    mode: HitMode
    hits: np.ndarray
    architectures: list[ArchitectureName]
    figures: dict[ArchitectureName, dict[str, np.ndarray]]
    plans: dict[ArchitectureName, list[dict[str, Any] | None]]
    tail_chunks: np.ndarray
    chunk_tokens: int
    findings: dict[str, Any] = field(default_factory=dict)
    fixed_plan: bool = False
    no_plan: dict[ArchitectureName, str] = field(default_factory=dict)  # why an architecture has none at all

    def points(self) -> list[dict[str, Any]]:
        """The `points` of the JSON view: hit, tail chunk, and per architecture the figures."""
        out = []
        for i, hit in enumerate(self.hits):
            point: dict[str, Any] = {"hit": float(hit), "tail_chunk_tokens": int(self.tail_chunks[i])}
            for arch in self.architectures:
                values: dict[str, Any] = {name: _finite(series[i]) for name, series in self.figures[arch].items()}
                values["plan"] = self.plans[arch][i]
                point[arch] = values
            out.append(point)
        return out

    def to_output(self) -> Bathtub:
        """The typed result `bathtub --json` prints (without a trace's marks)."""
        return Bathtub(
            workload=self.workload.name,
            mode=self.mode,
            fixed_plan=self.fixed_plan,
            chunk_tokens=self.chunk_tokens,
            rate_rps=self.workload.arrival.rate_rps,
            architectures=list(self.architectures),
            points=self.points(),
            findings=self.findings,
        )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


FIGURES = (
    "throughput_per_gpu_hour",
    "prefill_tokens_per_gpu_s",
    "prefill_tokens_per_gpu_s_alone",
    "bcr",
    "revenue_per_cost",
    "margin_usd_per_hour",
    "cost_usd_per_hour",
)


def bathtub(
    workload: Workload,
    base_dir: Path | None,
    architectures: Sequence[ArchitectureName] | None = None,
    options: BathtubOptions = BathtubOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> BathtubResult:
    """Sweep the hit rate from 0 to 1 in `options.points` steps; see the module docstring."""
    mode, points, chunk_tokens = options.mode, options.points, options.chunk_tokens
    check_points(points)
    if chunk_tokens is not None:
        check_chunk(chunk_tokens)
    chunk = chunk_tokens or workload.serving.chunk_tokens
    nominal = at_hit(workload, workload.hit_rate.mean(), "shift", chunk_tokens) if chunk_tokens else workload
    hits = np.linspace(0.0, 1.0, points)
    inputs = load_input_set(workload, base_dir)  # the files, read once for every point
    architectures = list(architectures) if architectures is not None else list(registry.names())
    shapes: dict[ArchitectureName, Shape | None] = {}
    no_plan: dict[ArchitectureName, str] = {}
    for arch in architectures:
        try:
            shapes[arch] = choose_shape(inputs.with_workload(nominal), arch, relay_by_bytes(nominal))
        except InfeasibleError as error:
            shapes[arch] = None
            no_plan[arch] = f"no instance kinds to size: {error}"
    figures = {arch: {name: np.full(points, np.nan) for name in FIGURES} for arch in architectures}
    plans: dict[ArchitectureName, list[dict[str, Any] | None]] = {arch: [None] * points for arch in architectures}
    fixed: dict[ArchitectureName, Plan | None] = {}
    if options.fixed_plan:
        for arch, shape in shapes.items():
            fixed[arch], reason = _fixed_plan(inputs.with_workload(nominal), shape)
            if reason is not None and arch not in no_plan:
                no_plan[arch] = f"no plan sized at the workload's hit rate {nominal.hit_rate.mean():.0%}: {reason}"
    tasks = [_PointTask(inputs, float(hit), mode, chunk_tokens, shapes, fixed, options.fixed_plan) for hit in hits]
    for i, point in enumerate(map_in_order(_point_figures, tasks, options.execution or Execution(), progress)):
        for arch, (values, plan) in point.items():
            for name, value in values.items():
                figures[arch][name][i] = value
            plans[arch][i] = plan
    prompts, probs = workload.prompt_tokens.support()
    mean_prompt = float(prompts @ probs)
    tails = np.array([tail_chunk_tokens(mean_prompt, float(h), chunk, workload.serving.page_tokens) for h in hits])
    result = BathtubResult(
        workload=workload,
        mode=mode,
        hits=hits,
        architectures=list(architectures),
        figures=figures,
        plans=plans,
        tail_chunks=tails,
        chunk_tokens=chunk,
        fixed_plan=options.fixed_plan,
        no_plan=no_plan,
    )
    result.findings = findings(result, mean_prompt)
    return result


@dataclass(frozen=True)
class _PointTask:
    """What one hit-rate point needs (the loaded inputs travel with it: no worker re-reads files)."""

    inputs: InputSet
    hit: float
    mode: HitMode
    chunk_tokens: int | None
    shapes: dict[ArchitectureName, Shape | None]
    fixed: dict[ArchitectureName, Plan | None]
    fixed_plan: bool


def _point_figures(task: _PointTask) -> dict[ArchitectureName, tuple[dict[str, float], dict[str, Any]]]:
    """Each architecture's figures and plan (as JSON) at one hit rate; architectures without a
    plan there are left out."""
    point = at_hit(task.inputs.workload, task.hit, task.mode, task.chunk_tokens)
    out = {}
    for arch, shape in task.shapes.items():
        if shape is None:
            continue
        if task.fixed_plan:
            plan = task.fixed[arch]
            values = _fixed_plan_figures(plan, task.inputs.with_workload(point)) if plan is not None else None
        else:
            values, plan = _resized_figures(point, shape, task.inputs)
        if values is not None and plan is not None:
            out[arch] = (values, plan.model_dump(mode="json", exclude_defaults=True))
    return out


def _resized_figures(point: Workload, shape: Shape, inputs: InputSet) -> tuple[dict[str, float] | None, Plan | None]:
    """The figures of the plan sized for `point`: it serves the offered rate on whole instances and
    lines, priced as such (the same figures as a fixed plan's, `_fixed_plan_figures`)."""
    here = inputs.with_workload(point)
    try:
        sized = relay_on_prefill_if_cheaper(size_plan(point, shape), here)
    except InfeasibleError:
        return None, None
    return _fixed_plan_figures(sized.plan, here), sized.plan


def _fixed_plan(nominal: InputSet, shape: Shape | None) -> tuple[Plan | None, str | None]:
    """The plan sized once at the workload's own hit rate, its relay on the prefill instances when
    that is no dearer and meets the SLA; (None, why) when it cannot be sized."""
    if shape is None:
        return None, None
    try:
        return relay_on_prefill_if_cheaper(size_plan(nominal.workload, shape), nominal).plan, None
    except InfeasibleError as error:
        return None, str(error)


def _fixed_plan_figures(plan: Plan, inputs: InputSet) -> dict[str, float] | None:
    """Figures of a fixed deployment at one hit point (module docstring): it serves
    min(offered rate, its capacity there) with the same whole instances and lines."""

    scenario = build_scenario(plan, inputs, source="bathtub plan")
    view = capacity_view(scenario)
    served = min(inputs.workload.arrival.rate_rps, view.max_rate_rps)
    cost = scenario.cost_per_hour
    gpus = sum(role.gpus for role in scenario.roles.values())
    revenue = served * view.revenue_per_request_usd * 3600
    return {
        "throughput_per_gpu_hour": served * 3600 / gpus,
        "prefill_tokens_per_gpu_s": view.prefill_tokens_per_gpu_s,
        "prefill_tokens_per_gpu_s_alone": view.prefill_tokens_per_gpu_s_alone,
        "bcr": served * 3600 / cost,
        "revenue_per_cost": revenue / cost,
        "margin_usd_per_hour": revenue - cost,
        "cost_usd_per_hour": cost,
    }


def findings(result: BathtubResult, mean_prompt: float) -> dict[str, Any]:
    """What the curve says: valley, singular points, crossovers, the workload's position, climb-out."""
    hits = result.hits
    workload = result.workload
    mean_hit = workload.hit_rate.mean()
    out: dict[str, Any] = {"workload_mean_hit": mean_hit, "architectures": {}}
    for arch in result.architectures:
        benefit = result.figures[arch]["revenue_per_cost"]
        throughput = result.figures[arch]["prefill_tokens_per_gpu_s_alone"]
        packed = result.figures[arch]["prefill_tokens_per_gpu_s"]
        finite = np.isfinite(benefit)
        if not finite.any():
            out["architectures"][arch] = {"feasible_points": 0, "no_plan_reason": result.no_plan.get(arch)}
            continue
        index = int(np.nanargmin(np.where(finite, benefit, np.nan)))
        left, right = benefit[finite][0], benefit[finite][-1]
        has_valley = bool(0 < index < len(hits) - 1 and benefit[index] < min(left, right) * (1 - VALLEY_DEPTH))
        at_mean = float(np.interp(mean_hit, hits[finite], benefit[finite]))
        dips = [
            {
                "hit": float(hits[i]),
                "tail_chunk_tokens": int(result.tail_chunks[i]),
                "drop": float(1 - throughput[i] / max(throughput[i - 1], throughput[i + 1])),
            }
            for i in local_minima(throughput)
        ]
        shape = curve_shape(hits, benefit)
        entry: dict[str, Any] = {
            "feasible_points": int(finite.sum()),
            "shape": shape.kind,
            "shape_words": shape.words,
            "valley": has_valley,
            "valley_min_hit": float(hits[index]),
            "valley_min_revenue_per_cost": float(benefit[index]),
            "left_rim_revenue_per_cost": float(left),
            "right_rim_revenue_per_cost": float(right),
            "revenue_per_cost_at_mean_hit": at_mean,
            "singular_points": dips,
            "packed_singular_points": [float(hits[i]) for i in local_minima(packed)],
        }
        if has_valley:
            climb = [i for i in range(index, len(hits)) if np.isfinite(benefit[i]) and benefit[i] >= left]
            if climb and mean_hit < hits[climb[0]]:
                target = float(hits[climb[0]])
                entry["climb_out_hit"] = target
                entry["climb_out_cache_factor"] = target / mean_hit if mean_hit > 0 else None
        out["architectures"][arch] = entry
    out["predicted_dips"] = predicted_dips(mean_prompt, result.chunk_tokens, workload.serving.page_tokens)
    out["pdd_vs_baselines"] = _crossovers(result)
    out["no_valley_note"] = None
    shaped = {a: e["shape"] for a, e in out["architectures"].items() if e.get("feasible_points")}
    if shaped and not any(e.get("valley") for e in out["architectures"].values()):
        kinds = sorted(set(shaped.values()))
        what = (
            f"revenue per cost is {' or '.join(kinds)} across the hit rate"
            if set(kinds) <= {"rising", "falling", "flat"}
            else "revenue per cost: " + "; ".join(f"{a} {k}" for a, k in shaped.items())
        )
        out["no_valley_note"] = (
            f"no valley for these inputs ({what}). A valley needs the cost per request to fall more slowly "
            "than revenue per request as hits rise (decode-bound plans) while low hits still pay full price: "
            "try a lower cached-token price ratio (prices.cached_input_usd_per_mtok), cheaper prefill GPUs, or "
            "a different chunk size (`pddplan sweep` over those fields shows where one appears)."
        )
    return out


def _crossovers(result: BathtubResult) -> list[dict[str, Any]]:
    """Hit rates where PDD's BCR crosses the best baseline's."""
    subject = registry.subject().name
    if subject not in result.architectures:
        return []
    baselines = [a for a in result.architectures if registry.get(a) in registry.baselines()]
    if not baselines:
        return []
    pdd = result.figures[subject]["bcr"]
    stacked = np.vstack([result.figures[a]["bcr"] for a in baselines])
    # a hit rate where no baseline is feasible has no best baseline (NaN), without a warning
    best = np.where(np.isfinite(stacked).any(axis=0), np.nanmax(np.nan_to_num(stacked, nan=-np.inf), axis=0), np.nan)
    sign = np.sign(np.where(np.isfinite(pdd) & np.isfinite(best), pdd - best, np.nan))
    return [
        {"hit": float(result.hits[i]), "pdd_wins_above": bool(sign[i] > 0)}
        for i in range(1, len(sign))
        if np.isfinite(sign[i - 1]) and np.isfinite(sign[i]) and sign[i] != sign[i - 1] and sign[i] != 0
    ]


# -- `pddplan bathtub` as one library call -------------------------------------------------------
@dataclass(frozen=True)
class BathtubRequest:
    """What `bathtub` is asked, checked: the workload and its folder, the architectures, how to
    sweep, and a trace whose hits to mark on the curve (None: none)."""

    workload: Workload
    base_dir: Path | None
    architectures: list[ArchitectureName]
    options: BathtubOptions
    trace: Path | None = None


@dataclass(frozen=True)
class BathtubFlags:
    """Every option of `pddplan bathtub`, by the command's own parameter names: what a caller (the
    command line or a library user) fills in, checked when it becomes a request (`request`)."""

    workload: str = "pdd-agent-64k"
    mode: str = "fixed"
    points: int = 101
    chunk: int | None = None
    fixed_plan: bool = True
    architecture: list[str] | None = None
    trace: Path | None = None
    png: Path | None = None
    svg: Path | None = None
    html: Path | None = None
    csv_path: Path | None = None
    jobs: int | None = None
    backend: str = "fork"
    scheduler: str | None = None
    json_out: bool = False

    def request(self) -> BathtubRequest:
        """The checked request, before any work: the mode, the number of points, the images asked
        for (matplotlib installed), the architectures, the workload, where the points run."""
        if self.mode not in ("fixed", "shift"):
            raise InputError(f"--mode = {self.mode!r}: expected fixed or shift")
        check_points(self.points)
        check_image_outputs(self.png, self.svg)
        names = architecture_names(self.architecture)
        spec = load_workload(self.workload)
        mode: HitMode = self.mode  # type: ignore[assignment]  # checked above
        execution = Execution(self.jobs, self.backend, False, self.scheduler)
        options = BathtubOptions(mode, self.points, self.chunk, self.fixed_plan, execution)
        return BathtubRequest(spec, workload_dir(self.workload), names, options, self.trace)


@dataclass(frozen=True)
class BathtubOutcome:
    """What `bathtub` found: the sweep, and where the request's trace (if any) marks it
    (`pddplan.trace.bathtub_marks`)."""

    result: BathtubResult
    marks: dict[str, Any] | None = None

    def to_output(self) -> Bathtub:
        """The typed result: the sweep's, with the trace's marks under `trace` when there are any."""
        result = self.result.to_output()
        if self.marks is not None:
            result.trace = self.marks
        return result


def run_request(request: BathtubRequest, progress: Callable[[int, int], None] | None = None) -> BathtubResult:
    """The hit-rate sweep the request asks for (`bathtub`)."""
    return bathtub(request.workload, request.base_dir, request.architectures, request.options, progress)


def mark_trace(request: BathtubRequest, result: BathtubResult) -> BathtubOutcome:
    """The outcome: `result`, with the hit the request's trace (Mooncake JSON lines) reaches at each
    cache size and the cache that climbs out of each valley, when the request names a trace."""
    if request.trace is None:
        return BathtubOutcome(result)
    kv = kv_bytes_per_token(workload_model(request.workload))
    return BathtubOutcome(result, trace_marks(result.findings, request.trace, "mooncake", kv))
