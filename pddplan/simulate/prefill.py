"""The prefill pool of the simulation: chunked prefill that packs requests into steps.

Every prefill instance runs steps back to back while it has work. A step takes up to C tokens
(the chunk budget): first the rest of the request the instance is in the middle of (a request
stays on the instance that started it, which holds its KV), then new requests from the pool's one
FIFO queue, in arrival order, until the budget is spent; the last one taken may be split, and
continues in the instance's next step. An idle instance starts a step when a request arrives: the
one idle longest (round robin, as a load balancer spreads requests; it matters where decoding
rides in the instance's steps, co-located serving or a relay on prefill instances).

A step of T tokens made of pieces s_i of requests i takes T_lin(T) + sum_i A_i * s_i / n_i, with
T_lin the step without attention (`pddplan.perf.roofline.linear_step_s`) and A_i the attention time
request i's n_i new tokens need, spread over its pieces in proportion to their tokens (the total is
exact; its split across steps is not modelled): alone in its step, at its own thread blocks'
efficiency (`PrefillCost.attention_s`), so a request alone on an idle instance takes its own
chunks' time; sharing the step, at a full chunk's (`PrefillCost.packed_attention_s`). A step of
one request's tokens alone takes T_lin of one sequence (`PrefillPool.alone_linear_s`): under
data-parallel attention its dense layers run on one rank, as in its alone time
(`PrefillCost.alone_s`). Requests with no new token skip the pool.
A relay on the prefill instances adds its decode tokens to every step: `extra_step_s`, its marginal
cost m(B) at the closed form's mean relay batch B (the coupling is one way: the relay's actual batch
does not feed back into the prefill steps).

Under data-parallel attention (`PrefillPool.ranks` r > 1) an instance is r ranks stepping in
lockstep, each with its own requests (their KV stays on the rank): a step gives each request the
instance is in the middle of its next piece, up to C tokens each, then starts waiting requests on
the ranks left free, in arrival order, one per rank. A step whose k pieces hold T_1..T_k tokens
takes L(k', T_max) + max_i A_i s_i / n_i: L(k, T) the step without attention when k ranks carry T
tokens each (`PrefillPool.rank_linear_s`), read at the busiest rank's T_max and k' = sum T_i / T_max
(the experts' tokens; interpolated between whole k), the ranks' attention in parallel.

With pipeline stages (`PrefillPool.stages` p > 1) every step above is a stage's (the step tables
are the slowest stage's, `pddplan.perf.roofline.pipeline_stage`): the instance starts its next
step when its first stage is free, each step crosses the stages in order, a stage taking it when
it is done with the step before (C_j = max(C_{j-1}, stage j free) + s, a flow shop), and a
request's prefill ends when its last step leaves the last stage (for a lone request the
closed form's `PrefillCost.fill_s`, sum_j s_j + (p - 1) max_j s_j).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PrefillPool:
    """A prefill pool: `instances` identical instances, chunk budget `chunk_tokens`, and
    `linear_s[T]` = T_lin(T) for T = 0..chunk_tokens (entry 0 unused; not read under data-parallel
    attention, whose steps come from `rank_linear_s`)."""

    instances: int
    chunk_tokens: int
    linear_s: list[float]
    extra_step_s: float = 0.0  # added to every step: a co-located relay's tokens (`pddplan.perf.mixed`)
    #: T_lin(T) of a step whose T tokens are one request's alone (None: `linear_s`); differs under
    #: data-parallel attention, where one sequence's dense layers run on one rank (`dp_rank_share`)
    alone_linear_s: list[float] | None = None
    #: data-parallel-attention ranks per instance (module docstring); rank_linear_s[k - 1][T] is
    #: L(k, T) for k = 1..ranks and T = 0..chunk_tokens (entry 0 unused)
    ranks: int = 1
    rank_linear_s: list[list[float]] | None = None
    stages: int = 1  # pipeline stages per instance (module docstring)


@dataclass(frozen=True)
class PrefillRun:
    """Per request, when its first prefill step started, when its last ended and on which instance;
    the pool's total busy time (the sum of its steps; under data-parallel attention its ranks' busy
    time over r, so that it measures the ranks' utilization); and per instance its steps' (start,
    end) times in order (a co-located relay decodes in them)."""

    start_s: np.ndarray
    end_s: np.ndarray
    busy_s: float
    instance: np.ndarray
    steps: list[tuple[list[float], list[float]]]


def _per_token(seconds: np.ndarray, new_tokens: np.ndarray) -> list[float]:
    """seconds / new tokens per request (0 for a request with none)."""
    return np.divide(seconds, new_tokens, out=np.zeros(len(new_tokens)), where=np.asarray(new_tokens) > 0).tolist()


@dataclass
class _Filling:
    """A run being filled in, as lists (the loops write one element at a time, which a list does
    faster than an array): every request starts and ends at its arrival until a step takes it."""

    start_s: list[float]
    end_s: list[float]
    instance: list[int]
    steps: list[tuple[list[float], list[float]]]

    def run(self, busy_s: float) -> PrefillRun:
        return PrefillRun(
            start_s=np.array(self.start_s, dtype=np.float64),
            end_s=np.array(self.end_s, dtype=np.float64),
            busy_s=busy_s,
            instance=np.array(self.instance, dtype=np.int64),
            steps=self.steps,
        )


def _start(
    pool: PrefillPool, arrival_s: np.ndarray, new_tokens: np.ndarray, attention_s: np.ndarray
) -> tuple[_Filling, list[float], list[float], list[float], list[int]]:
    """A run to fill in (`_Filling`), and the loop's lists: arrivals, new tokens, attention per new
    token, the requests that prefill."""
    count = len(arrival_s)
    arrival = np.asarray(arrival_s, dtype=np.float64).tolist()
    filling = _Filling(list(arrival), list(arrival), [0] * count, [([], []) for _ in range(pool.instances)])
    tokens = np.asarray(new_tokens, dtype=np.float64).tolist()
    waiting = [i for i in range(count) if tokens[i] > 0]
    return filling, arrival, tokens, _per_token(attention_s, new_tokens), waiting


def _next_step(
    busy: list[tuple[float, int]], idle: deque[int], arrival: list[float], waiting: list[int], head: int
) -> tuple[float, int] | None:
    """When and where the next step runs: on the instance free first, or at the next arrival on the
    instance idle longest (None when neither comes)."""
    free_t = busy[0][0] if busy else math.inf
    next_arrival = arrival[waiting[head]] if head < len(waiting) and idle else math.inf
    if free_t == math.inf and next_arrival == math.inf:
        return None
    if free_t <= next_arrival:
        return heapq.heappop(busy)
    return next_arrival, idle.popleft()


def run_prefill_pool(
    pool: PrefillPool,
    arrival_s: np.ndarray,
    new_tokens: np.ndarray,
    attention_s: np.ndarray,
    packed_attention_s: np.ndarray | None = None,
) -> PrefillRun:
    """When every request's prefill starts and ends, stepping the pool as the module says.

    `arrival_s` must be sorted. Each loop pass either runs one step on the instance free first or,
    when an instance is idle, starts one at the next arrival; nothing else.
    """
    if pool.ranks > 1:
        return _run_rank_pool(pool, arrival_s, new_tokens, attention_s)
    run, arrival, tokens, attention_per_token, waiting = _start(pool, arrival_s, new_tokens, attention_s)
    start, end, on_instance, steps = run.start_s, run.end_s, run.instance, run.steps
    packed = attention_s if packed_attention_s is None else packed_attention_s
    packed_per_token = _per_token(packed, new_tokens)
    budget = float(pool.chunk_tokens)
    linear = pool.linear_s
    alone_linear = linear if pool.alone_linear_s is None else pool.alone_linear_s
    busy: list[tuple[float, int]] = []
    idle = deque(range(pool.instances))  # longest idle first
    current = [-1] * pool.instances  # the request an instance is in the middle of
    left = [0.0] * pool.instances  # its tokens still to prefill
    head = 0
    busy_s = 0.0
    # with pipeline stages: per instance, when each stage after the first is free
    later_stages = [[0.0] * (pool.stages - 1) for _ in range(pool.instances)]
    while (step := _next_step(busy, idle, arrival, waiting, head)) is not None:
        t, k = step
        room = budget
        step_tokens = 0.0
        step_attention = 0.0  # at the pieces' own efficiency
        packed_attention = 0.0  # at a full chunk's
        pieces = 0
        finished: list[int] = []
        if current[k] >= 0:
            i = current[k]
            remaining = left[k]
            piece = room if room < remaining else remaining
            room -= piece
            step_tokens += piece
            step_attention += attention_per_token[i] * piece
            packed_attention += packed_per_token[i] * piece
            pieces += 1
            left[k] -= piece
            if left[k] <= 0:
                finished.append(i)
                current[k] = -1
        while room > 0 and head < len(waiting) and arrival[waiting[head]] <= t:
            i = waiting[head]
            head += 1
            start[i] = t
            piece = room if room < tokens[i] else tokens[i]
            room -= piece
            step_tokens += piece
            step_attention += attention_per_token[i] * piece
            packed_attention += packed_per_token[i] * piece
            pieces += 1
            if piece < tokens[i]:
                current[k], left[k] = i, tokens[i] - piece
            else:
                finished.append(i)
        if step_tokens == 0:
            idle.append(k)
            continue
        if pieces == 1:
            step_s = alone_linear[round(step_tokens)] + step_attention + pool.extra_step_s
        else:
            step_s = linear[round(step_tokens)] + packed_attention + pool.extra_step_s
        busy_s += step_s
        done = t + step_s
        steps[k][0].append(t)
        steps[k][1].append(done)
        out = done  # when the step leaves the last stage
        stages = later_stages[k]
        for j, free in enumerate(stages):
            out = (free if free > out else out) + step_s
            stages[j] = out
        for i in finished:
            end[i] = out
            on_instance[i] = k
        heapq.heappush(busy, (done, k))
    return run.run(busy_s)


def _run_rank_pool(
    pool: PrefillPool, arrival_s: np.ndarray, new_tokens: np.ndarray, attention_s: np.ndarray
) -> PrefillRun:
    """`run_prefill_pool` under data-parallel attention: instances of `pool.ranks` lockstep ranks
    (module docstring)."""
    assert pool.rank_linear_s is not None
    run, arrival, tokens, attention_per_token, waiting = _start(pool, arrival_s, new_tokens, attention_s)
    start, end, on_instance, steps = run.start_s, run.end_s, run.instance, run.steps
    chunk = float(pool.chunk_tokens)
    ranks = pool.ranks
    table = pool.rank_linear_s
    busy: list[tuple[float, int]] = []
    idle = deque(range(pool.instances))  # longest idle first
    running: list[dict[int, float]] = [{} for _ in range(pool.instances)]  # request -> tokens left
    head = 0
    busy_s = 0.0
    while (step := _next_step(busy, idle, arrival, waiting, head)) is not None:
        t, k = step
        mine = running[k]
        while len(mine) < ranks and head < len(waiting) and arrival[waiting[head]] <= t:
            i = waiting[head]
            head += 1
            start[i] = t
            mine[i] = tokens[i]
        if not mine:
            idle.append(k)
            continue
        largest = 0.0
        total = 0.0
        attention = 0.0
        finished: list[int] = []
        # min() and max() in their own order as conditional expressions (the loop runs per rank
        # and step: a third of a 100,000-request simulation's setup)
        for i, left in mine.items():
            piece = chunk if chunk < left else left
            if piece > largest:
                largest = piece
            total += piece
            own = attention_per_token[i] * piece
            if own > attention:
                attention = own
            if left - piece <= 0:
                finished.append(i)
            else:
                mine[i] = left - piece
        size = round(largest)
        spread = total / largest  # k': the busy ranks the experts' tokens amount to
        low = int(spread)
        linear = table[low - 1][size]
        if low < len(mine):
            linear += (table[low][size] - linear) * (spread - low)
        step_s = linear + attention + pool.extra_step_s
        busy_s += step_s * len(mine) / ranks  # rank-seconds over r: the ranks' utilization
        done = t + step_s
        steps[k][0].append(t)
        steps[k][1].append(done)
        for i in finished:
            del mine[i]
            end[i] = done
            on_instance[i] = k
        heapq.heappush(busy, (done, k))
    return run.run(busy_s)
