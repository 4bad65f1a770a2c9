"""A trace as the requests a simulation replays (`simulate --trace`): arrival times, prompt and
output lengths as recorded, and each request's hit fraction from the prefix cache it would have
met (`pddplan.trace.cache.replay`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pddplan.errors import InputError
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.scenarios.scenario import Scenario
from pddplan.support.limits import check_rate
from pddplan.trace.cache import Eviction, replay
from pddplan.trace.curve import MAX_CAPACITY_TOKENS, parse_capacity
from pddplan.trace.read import TraceFormat, TraceRequest, hashed_format, read_trace


@dataclass(frozen=True)
class TraceReplay:
    """The first requests of a trace, in arrival order (seconds from the first)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    hit: np.ndarray
    output_tokens: np.ndarray
    source: str = field(default="")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def rate_rps(self) -> float:
        """Requests / the span from the first arrival to the last."""
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0
        if span <= 0:
            raise InputError(f"{self.source}: the replayed requests span no time: no arrival rate")
        return len(self) / span


class _Collected(Exception):
    """Raised to stop the cache replay once enough requests are collected."""


def load_replay(
    path: Path,
    fmt: TraceFormat,
    capacity_blocks: int,
    limit: int,
    block_tokens: int = 512,
    eviction: Eviction = "lru",
) -> TraceReplay:
    """The first `limit` requests of the trace with block hashes, with their hits at the cache of
    `capacity_blocks` blocks."""
    arrival: list[float] = []
    prompt: list[int] = []
    hit: list[float] = []
    output: list[int] = []

    def keep(request: TraceRequest, fraction: float) -> None:
        arrival.append(request.arrival_s)
        prompt.append(request.input_tokens)
        hit.append(fraction)
        output.append(max(request.output_tokens, 1))
        if len(arrival) >= limit:
            raise _Collected

    with contextlib.suppress(_Collected):
        replay(read_trace(path, fmt), capacity_blocks, block_tokens, eviction, on_request=keep)
    if not arrival:
        raise InputError(f"{path}: no requests with prompt block hashes: a replay needs their hits")
    return TraceReplay(
        arrival_s=np.asarray(arrival) - arrival[0],
        prompt_tokens=np.asarray(prompt, dtype=np.int64),
        hit=np.asarray(hit),
        output_tokens=np.asarray(output, dtype=np.int64),
        source=str(path),
    )


def trace_replay(
    scenario: Scenario,
    trace: Path,
    fmt: str,
    cache_capacity: str | None,
    requests: int,
    progress: Callable[[str], None] | None = None,
) -> TraceReplay:
    """`simulate --trace`: the trace's first `requests` requests with their hits at one LRU prefix
    cache of `cache_capacity` (bytes with `scenario`'s model's KV bytes per token, or tokens; None:
    unbounded), in blocks of 512 tokens. InputError for a format without block hashes, or for a
    cache capacity that is not exactly one size, before the trace is read."""
    chosen = hashed_format(fmt, why="a replay needs block hashes")
    tokens = MAX_CAPACITY_TOKENS
    if cache_capacity is not None:
        tokens = parse_capacity(cache_capacity, kv_bytes_per_token(scenario.model)).tokens
    if progress is not None:
        progress(f"reading {trace}...")
    return load_replay(trace, chosen, int(tokens // 512), requests)


def replay_scenario(scenario: Any, replay: TraceReplay) -> Any:
    """`scenario` offered the replay's traffic: its mean rate (what goodput, revenue and the SLA
    verdict are judged at). InputError when a replayed prompt is longer than the workload's
    longest, which the plan's memory was checked for, or when that rate is out of bounds
    (`check_rate`: two requests a nanosecond apart made 2e9 requests/s)."""

    longest = scenario.workload.prompt_tokens.largest()
    too_long = int(np.argmax(replay.prompt_tokens > longest)) if (replay.prompt_tokens > longest).any() else None
    if too_long is not None:
        raise InputError(
            f"{replay.source}: request {too_long + 1} has {int(replay.prompt_tokens[too_long]):,} prompt tokens, more "
            f"than workload {scenario.workload.name}'s longest ({longest:,}) that the plan was checked for; build the "
            "workload from the trace (`trace import --workload-out`)"
        )
    check_rate(replay.rate_rps, f"{replay.source}: the replayed requests' mean rate")
    arrival = scenario.workload.arrival.model_copy(update={"rate_rps": replay.rate_rps})
    plan = scenario.plan.model_copy(update={"rate_rps": None})
    return replace(scenario, plan=plan, workload=scenario.workload.model_copy(update={"arrival": arrival}))
