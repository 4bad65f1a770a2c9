"""A workload built from a trace (`trace import --workload-out`): its joint (prompt, hit)
distribution at a cache capacity, its output lengths, its arrival rate and burstiness.

What comes from the trace, and how:
- each request's hit fraction is what a prefix cache of the given capacity holds when it arrives
  (`pddplan.trace.cache.replay`; unbounded by default);
- `request_mix`: requests binned by prompt length (log-spaced edges, PROMPT_EDGES) and hit
  (exact 0, then HIT_BIN_WIDTH-wide bins, then exact 1); each non-empty cell is one class at its
  requests' mean prompt and mean hit, with its share of requests. Prompt and hit are drawn
  together from it, so a correlation between them (long agent prompts hitting more) is kept;
- `prompt_tokens` and `hit_rate`: the mix's marginals (a histogram over the prompt bins, spanning
  each bin's shortest to longest prompt; one point bucket per hit bin at its requests' mean hit,
  so the marginal's mean is the mix's); `output_tokens`: a histogram over the same edges;
- `arrival`: the trace's mean rate following its per-minute rate profile (`rate_profile`,
  repeating; the simulator follows it, the closed form sees the mean), Poisson within a minute;
  a trace of under two minutes has no profile and keeps its inter-arrival coefficient of
  variation instead (a Gamma process; Poisson when that is 1 within 2%).
Everything else (model, SLA, prices, deployment, serving) comes from the template workload.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pddplan.errors import InputError
from pddplan.inputs import load_plan, load_workload, workload_dir, workload_model
from pddplan.inputs.input_set import load_input_set
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.specs.workload import Workload
from pddplan.support.loading import validate, write_atomic
from pddplan.trace.cache import Eviction, Routing, replay
from pddplan.trace.curve import MAX_CAPACITY_TOKENS, parse_capacity
from pddplan.trace.outputs import TraceImport
from pddplan.trace.prefetch import stream_trace
from pddplan.trace.read import TraceFormat, TraceRequest, hashed_format
from pddplan.trace.stats import summarize
from pddplan.trace.tiers import parse_tier, replay_tiers

#: Prompt / output length bin edges (tokens): 16 per decade from 1 to 10M.
PROMPT_EDGES = np.unique(np.round(np.logspace(0, 7, 7 * 16 + 1)).astype(np.int64))
HIT_BIN_WIDTH = 0.05
POISSON_CV_TOLERANCE = 0.02


def _hit_bin(hit: float) -> int:
    """0 for a hit of exactly 0, the last bin for exactly 1, else 1 + floor(hit / width)."""
    bins = round(1 / HIT_BIN_WIDTH)
    if hit <= 0:
        return 0
    if hit >= 1:
        return bins + 1
    return 1 + min(int(hit / HIT_BIN_WIDTH), bins - 1)


@dataclass
class _Cell:
    count: int = 0
    prompt_sum: float = 0.0
    hit_sum: float = 0.0
    load_sum: float = 0.0


@dataclass
class _Range:
    count: int = 0
    low: float = math.inf
    high: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.low = min(self.low, value)
        self.high = max(self.high, value)


@dataclass
class JointHistogram:
    """The per-request (prompt, hit) and output counts a workload is built from."""

    cells: dict[tuple[int, int], _Cell] = field(default_factory=dict)
    prompts: dict[int, _Range] = field(default_factory=dict)
    outputs: dict[int, _Range] = field(default_factory=dict)
    requests: int = 0

    def add(self, request: TraceRequest, hit: float, load_s: float = 0.0) -> None:
        p = int(np.searchsorted(PROMPT_EDGES, request.input_tokens, side="right"))
        h = _hit_bin(hit)
        cell = self.cells.setdefault((p, h), _Cell())
        cell.count += 1
        cell.prompt_sum += request.input_tokens
        cell.hit_sum += hit
        cell.load_sum += load_s
        self.prompts.setdefault(p, _Range()).add(request.input_tokens)
        self.outputs.setdefault(
            int(np.searchsorted(PROMPT_EDGES, max(request.output_tokens, 1), side="right")), _Range()
        ).add(max(request.output_tokens, 1))
        self.requests += 1


def joint_histogram(
    requests: Iterable[TraceRequest],
    capacity_blocks: int,
    block_tokens: int = 512,
    eviction: Eviction = "lru",
    instances: int = 1,
    routing: Routing = "affinity",
) -> JointHistogram:
    """Replay the trace through the cache and bin every request's (prompt, hit) and output."""
    histogram = JointHistogram()
    replay(requests, capacity_blocks, block_tokens, eviction, instances, routing, on_request=histogram.add)
    if histogram.requests == 0:
        raise InputError(
            "the trace has no requests with prompt block hashes: a hit rate needs them "
            "(--format mooncake, or csv with hash_ids)"
        )
    return histogram


def _shares(counts: list[int]) -> list[float]:
    """Shares that sum to 1 in floating point (the last absorbs the rounding)."""
    total = sum(counts)
    shares = [round(c / total, 12) for c in counts]
    shares[-1] = round(1.0 - sum(shares[:-1]), 12)
    return shares


def _length_histogram(ranges: dict[int, _Range]) -> dict[str, Any]:
    keys = sorted(ranges)
    shares = _shares([ranges[k].count for k in keys])
    return {
        "kind": "histogram",
        "bins": [
            {"low_tokens": int(ranges[k].low), "high_tokens": int(ranges[k].high), "share": s}
            for k, s in zip(keys, shares, strict=True)
        ],
    }


def workload_fields(histogram: JointHistogram, summary: TraceImport, source: str) -> dict[str, Any]:
    """The trace-made fields of a workload: arrival, prompt_tokens, output_tokens, hit_rate,
    request_mix (module docstring)."""
    keys = sorted(histogram.cells)
    cells = [histogram.cells[k] for k in keys]
    shares = _shares([c.count for c in cells])
    classes = [
        {"prompt_tokens": max(1, round(c.prompt_sum / c.count)), "hit": round(c.hit_sum / c.count, 6), "share": s}
        | ({"load_s": round(c.load_sum / c.count, 9)} if c.load_sum > 0 else {})
        for c, s in zip(cells, shares, strict=True)
    ]
    by_hit: dict[int, list[float]] = {}
    for (_, h), cell in zip(keys, cells, strict=True):
        count_sum = by_hit.setdefault(h, [0.0, 0.0])
        count_sum[0] += cell.count
        count_sum[1] += cell.hit_sum
    hit_keys = sorted(by_hit)
    hit_shares = _shares([int(by_hit[k][0]) for k in hit_keys])
    # each hit bin as a point at its requests' mean hit, so the marginal's mean is the mix's
    buckets = []
    for k, s in zip(hit_keys, hit_shares, strict=True):
        mean = round(by_hit[k][1] / by_hit[k][0], 6)
        buckets.append({"low": mean, "high": mean, "share": s})
    prompt_marginal = _length_histogram(histogram.prompts)
    # a class's prompt is its cell's mean, rounded: keep the marginal's top at least that long
    longest = max(c["prompt_tokens"] for c in classes)
    top = prompt_marginal["bins"][-1]
    top["high_tokens"] = max(top["high_tokens"], longest)
    rate = summary.rate_rps
    if not rate:
        raise InputError("the trace spans no time (one request, or every timestamp equal): no arrival rate")
    profile = rate_profile(summary.requests_per_minute or [], summary.duration_s or 0.0)
    measured = summary.interarrival_cv
    cv = 1.0 if measured is None else measured
    arrival: dict[str, Any] = {"rate_rps": round(rate, 6), "process": "poisson"}
    # With a profile, the minute-to-minute swings are the profile's: the whole-trace CV would count
    # them twice, so within a minute arrivals are taken as Poisson.
    if not profile and abs(cv - 1.0) > POISSON_CV_TOLERANCE:
        arrival = {"rate_rps": round(rate, 6), "process": "gamma", "cv": round(min(max(cv, 0.01), 20.0), 4)}
    arrival |= profile
    return {
        "arrival": arrival,
        "prompt_tokens": prompt_marginal,
        "output_tokens": _length_histogram(histogram.outputs),
        "hit_rate": {"buckets": buckets},
        "request_mix": {"classes": classes, "source": source},
    }


def rate_profile(per_minute: list[int], duration_s: float, most: int = 1000) -> dict[str, Any]:
    """The trace's requests per minute as a repeating relative rate profile (the arrival field
    `rate_profile`, steps of `profile_step_s`): the last, partial minute scaled to a full minute's
    rate (dropped when it covers under 10 s), minutes summed in groups when there are more than
    `most`. Empty for a trace of under two minutes (no shape to keep)."""
    counts = [float(c) for c in per_minute]
    covered = duration_s / 60.0 - (len(counts) - 1)  # minutes of the last minute the trace spans
    if counts and 0 < covered < 1:
        if covered * 60 < 10:
            counts.pop()
        else:
            counts[-1] /= covered
    if len(counts) < 2:
        return {}
    group = math.ceil(len(counts) / most)
    steps = [sum(counts[i : i + group]) / len(counts[i : i + group]) for i in range(0, len(counts), group)]
    return {"rate_profile": [round(s, 6) for s in steps], "profile_step_s": 60.0 * group}


def trace_digest(path: Path) -> str:
    """The first 12 hex digits of the trace's SHA-256 (streamed)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def build_workload(template: Workload, fields: dict[str, Any], name: str, description: str, where: str) -> Workload:
    """`template` with the trace-made `fields`, validated as any workload file is (errors name `where`)."""

    data = template.model_dump(mode="json", exclude_none=True)
    data.update(fields, name=name, description=description)
    return validate(Workload, data, where)


@dataclass(frozen=True)
class TraceWorkload:
    """A trace-built workload with what it was built from."""

    workload: Workload
    requests: int  # requests with block hashes
    summary: TraceImport
    capacity_text: str
    eviction: str


@dataclass(frozen=True)
class CacheChoice:
    """The prefix cache a trace's hits are replayed through: one cache of `capacity` (bytes with
    the model's KV, or tokens; None: unbounded) evicting by `eviction`, or a chain of `tiers`
    (`pddplan.trace.tiers`, NAME:CAPACITY[:BANDWIDTH]) whose slower tiers' load times the request
    mix carries."""

    capacity: str | None = None
    eviction: Eviction = "lru"
    tiers: tuple[str, ...] = ()


def workload_from_trace(
    trace: Path,
    fmt: Any,
    template: Workload,
    cache: CacheChoice | None = None,
    block_tokens: int = 512,
    name: str | None = None,
) -> TraceWorkload:
    """`template` serving the trace's traffic (module docstring), hits replayed through `cache`
    (default: one unbounded LRU cache)."""
    cache = cache or CacheChoice()
    cache_capacity, eviction, tiers = cache.capacity, cache.eviction, list(cache.tiers)

    if eviction not in ("lru", "lfu"):
        raise InputError(f"--eviction = {eviction!r}: expected lru or lfu")
    if cache_capacity is None:
        tokens, capacity_text = MAX_CAPACITY_TOKENS, "unbounded"
    else:
        capacity = parse_capacity(cache_capacity, kv_bytes_per_token(workload_model(template)))
        tokens, capacity_text = capacity.tokens, f"{capacity.text} ({capacity.tokens:,.0f} tokens)"
    summary = summarize(stream_trace(trace, fmt, block_tokens), block_tokens).to_output(str(trace), fmt)
    if tiers:
        if cache_capacity is not None:
            raise InputError("give --cache-capacity (one cache) or --tier (a chain of tiers), not both")
        kv = kv_bytes_per_token(workload_model(template))
        chain = [parse_tier(text, kv) for text in tiers]
        histogram = JointHistogram()
        replay_tiers(stream_trace(trace, fmt, block_tokens), chain, kv, block_tokens, on_request=histogram.add)
        if histogram.requests == 0:
            raise InputError("the trace has no requests with prompt block hashes: a hit rate needs them")
        capacity_text, eviction = " / ".join(t.name + " " + t.text for t in chain), "lru"
    else:
        blocks = int(min(tokens / block_tokens, MAX_CAPACITY_TOKENS))
        histogram = joint_histogram(stream_trace(trace, fmt, block_tokens), blocks, block_tokens, eviction)
    source = f"trace {trace.name} (sha256 {trace_digest(trace)}), {eviction.upper()} prefix cache {capacity_text}"
    try:
        fields = workload_fields(histogram, summary, source)
    except InputError as error:  # the trace's own figures: name the trace
        raise InputError(f"{trace}: {error}") from None
    description = f"{template.name}'s deployment serving the traffic of {source}"
    workload = build_workload(template, fields, name or template.name, description, f"{trace}: its workload")
    return TraceWorkload(workload, histogram.requests, summary, capacity_text, eviction)


def traced_scenario(
    plan: str,
    workload: str,
    trace: Path,
    fmt: str,
    cache_capacity: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Scenario:
    """The plan file `plan` on `workload`'s deployment, serving the trace's traffic
    (`workload_from_trace`, hits through one LRU cache of `cache_capacity`; None: unbounded).
    InputError for a format without block hashes, before any file is read."""
    chosen = hashed_format(fmt)
    if progress is not None:
        progress(f"reading {trace}...")
    built = workload_from_trace(trace, chosen, load_workload(workload), CacheChoice(cache_capacity))
    inputs = load_input_set(built.workload, workload_dir(workload))
    return build_scenario(load_plan(plan), inputs, source=plan)


def write_trace_workload(
    trace: Path, fmt: TraceFormat, like: str, path: Path, cache: CacheChoice, block_tokens: int = 512
) -> None:
    """`trace import --workload-out`: the trace's traffic (`workload_from_trace`, hits through
    `cache`) with `like`'s model, SLA, prices and deployment, written atomically to `path` as YAML
    under a header saying where each part came from."""
    built = workload_from_trace(trace, fmt, load_workload(like), cache, block_tokens, name=path.stem)
    summary = built.summary
    cv, peak = summary.interarrival_cv or 1.0, summary.peak_to_mean_per_minute or 1.0
    header = (
        f"# Written by `pddplan trace import {trace.name} --workload-out {path.name} --like {like}`.\n"
        f"# From the trace ({built.requests:,} requests with block hashes): arrival (mean rate,\n"
        f"# inter-arrival CV {cv:.2f}), prompt and output lengths, and request_mix, the joint (prompt, hit)\n"
        f"# distribution with hits replayed through a {built.capacity_text} {built.eviction.upper()} prefix cache.\n"
        f"# The trace's per-minute rate peaks at {peak:.2f}x its mean: arrivals follow that profile in\n"
        "# the simulation (and optimize's verification); the closed form sees the mean rate.\n"
        f"# From {like}: model, SLA, prices, deployment, serving.\n"
    )
    data = built.workload.model_dump(mode="json", exclude_none=True)
    write_atomic(path, header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
