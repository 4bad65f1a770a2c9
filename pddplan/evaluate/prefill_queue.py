"""The prefill pool as a G/G/c queue whose work per request depends on how steps get packed.

Chunked prefill fills a step's leftover budget with the next waiting requests' tokens
(`pddplan.simulate.prefill`). A request arriving at an idle instance runs alone and occupies it for
its alone engine time A. One that waits (probability p, the G/G/c probability of waiting, by PASTA)
goes into the next step with the others that arrived meanwhile, k requests in all, and they share
the step's fixed part F (weight reads, overheads) of its tail chunk: it pays v + F / k where
A = v + F. Fully packed (k = C / r for a tail of r tokens) it pays P = v + F r / C
(`RequestClasses.prefill_work_s`), so

    W_k = P + (A - P) g(k),  g(k) = (1/k - r/C) / (1 - r/C), clipped to [0, 1].

The others in its step are the arrivals at its instance during the step before, Poisson with mean
mu = lam T / c. A busy instance's steps carry what arrived during the previous one, so their length
T solves T = F + (lam T / c) v: T = F / (1 - lam v / c) (unbounded, so fully packed, once
lam v / c >= 1), with F = (A - P) / (1 - r/C) and v = A - F averaged over requests. Then
E[1/k] = E[1/(1 + Poisson(mu))] = (1 - e^-mu) / mu, and

    W(p) = A - p (A - P) (1 - g),  g = g at E[1/k].

p solves p = P_wait(c, lam, E[W(p)]) (Allen-Cunneen). The right side falls as p rises (more
packing, less work, less waiting), so the root is unique; P(wait) is Erlang C at the offered load
lam E[W], and E[W] is linear in p, so the root is found by regula falsi on one Erlang C per step.

Under data-parallel attention an instance is r ranks that prefill apart (each takes one request at
a time, its chunks up to the budget each step; `pddplan.perf.roofline.prefill_cost`) in lockstep
steps, so the pool is c r servers. A request's own time grows with the ranks busy beside it, in
two ways. Their tokens join its steps' experts: alone (one rank busy) its chunks take A, with every
rank busy L. And a step lasts as long as the longest piece any rank runs: its chunk step s lasts
E[max(s, M)], M the longest of the other r - 1 ranks' steps, each busy with probability rho, its
step drawn from the busy ranks' step lengths G (step-weighted over classes and chunks; beyond
STEP_BINS distinct lengths, in that many bins of equal weight):
P(M <= x) = (1 - rho + rho G(x))^(r - 1). With the other ranks busy a share rho of the time (the
ranks' utilization, mean field), a request holds its rank for

    W = A + (L - A) rho + sum_j (E[max(s_j, M)] - s_j),   rho = lam E[W] / (c r),

rho found by iterating from the root without the stretch, lam E[A] / (c r - lam E[L - A])
(LOCKSTEP_PASSES passes; 1 once saturated). The wait is Allen-Cunneen's for c r servers with W's
mean and variance. A request also joins the instances' steps at a step's end: when every instance
is busy (each 1 - (1 - rho)^r of the time) it waits E[S^2] / (2 E[S]) / c, S an instance's step,
the longest of its busy ranks'. Its own prefill latency, beyond A, is the rest of W plus that
join: `PrefillQueue.own_extra_s`. Decode rows co-located on the instance ride in its lockstep
steps, which run while any rank prefills, 1 - (1 - rho)^r of the time, with
E[k | busy] = r rho / (1 - (1 - rho)^r) ranks busy in a step.

With pipeline stages the queue is the first stage's (every time above a stage's), and a request's
last chunk then crosses the later stages: alone in (pp - 1) m, m its longest own step (in its
`prefill_s`), behind the fuller steps ahead of it in (pp - 1) max(m, s_full) while the instance is
busy; `own_extra_s` adds that difference times the utilization (`_drain_behind_s`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike

from pddplan.evaluate.classes import RequestClasses
from pddplan.evaluate.queueing import allen_cunneen, erlang_c

ROOT_STEPS = 8  # at most; Illinois reaches |h| < 1e-12 in 5-6 steps on these smooth, monotone roots
#: the busy ranks' step lengths, binned by equal weight (the stretch's cost grows with the bins)
STEP_BINS = 48
#: fixed-point passes for the ranks' utilization under the lockstep's stretch, at most (each raises
#: rho towards the least fixed point; they stop once it moves by less than 1e-12)
LOCKSTEP_PASSES = 8


@dataclass(frozen=True)
class PrefillQueue:
    """The pool at a rate (arrays broadcast like `count` and `rate`): probability of waiting, mean
    wait given a wait, mean work per request E[W] and utilization lam E[W] / c (per server: an
    instance, or a rank under data-parallel attention). `own_extra_s` (the rate's shape, then a
    class axis) is what a request's own prefill takes beyond its alone time (0 but under
    data-parallel attention). For decode rows co-located on the instances: `busy_share`, the share
    of time an instance runs prefill steps; `loaded_share`, how full a prefill step is between a
    lone request's chunk (0) and the instance's full load (1): P(wait) (a step formed while requests
    wait is packed to the budget), or (E[k | busy] - 1) / (r - 1) under data-parallel attention;
    `work_left_share`, the probability the instance still prefills when a request's prefill ends:
    P(wait), or that one of the other r - 1 ranks runs a chunk that is not its request's last,
    1 - (1 - rho q)^(r - 1), q the share of such chunks (`_continuing_share`)."""

    p_wait: np.ndarray
    wait_mean_s: np.ndarray
    work_s: np.ndarray
    utilization: np.ndarray
    own_extra_s: np.ndarray
    busy_share: np.ndarray
    loaded_share: np.ndarray
    work_left_share: np.ndarray


def _tail_share(classes: RequestClasses) -> np.ndarray:
    """r / C per class: the tail chunk's tokens over the budget (1 when the last chunk is full)."""
    chunk = classes.chunk_tokens
    tail = classes.new_tokens - np.maximum(np.ceil(classes.new_tokens / chunk) - 1.0, 0.0) * chunk
    return np.clip(tail / chunk, 0.0, 1.0)


def _step_parts(classes: RequestClasses) -> tuple[float, float]:
    """(E[F], E[v]): the fixed part of a request's tail step and the rest of its alone time A = v + F,
    from F = (A - P) / (1 - r/C) (no fixed part to share when the tail chunk is full)."""
    r = _tail_share(classes)
    gain = classes.prefill_alone_s - classes.prefill_work_s
    with np.errstate(divide="ignore", invalid="ignore"):
        fixed = np.where(r < 1.0, gain / (1.0 - r), 0.0)
    variable = classes.prefill_alone_s - fixed
    return float(fixed @ classes.input_prob), float(variable @ classes.input_prob)


def _shared_fraction(classes: RequestClasses, mu: np.ndarray) -> np.ndarray:
    """g per (mu, class): the share of A - P a waiting request still pays when k = 1 + Poisson(mu)
    requests share its step (module docstring), for its tail of r tokens."""
    r = _tail_share(classes)
    m = np.maximum(mu.reshape(-1, 1), 1e-12)
    inverse_k = np.where(np.isinf(m), 0.0, -np.expm1(-np.minimum(m, 1e300)) / m)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(r < 1.0, (inverse_k - r) / (1.0 - r), 0.0)
    return np.clip(g, 0.0, 1.0)


def _solve_waiting(servers: np.ndarray, rate: np.ndarray, mean_alone: float, reduction: np.ndarray) -> np.ndarray:
    """The root p of h(p) = P_wait(c, lam (A - p D)) - p on [0, 1], h falling (Illinois regula falsi).

    P(wait) in Allen-Cunneen is Erlang C at the offered load, so only E[W] = A - p D enters it."""
    low, high = np.zeros(servers.shape), np.ones(servers.shape)
    ends = erlang_c(np.stack([servers, servers]), np.stack([rate * mean_alone, rate * (mean_alone - reduction)]))
    h_low, h_high = ends[0] - low, ends[1] - high  # one call for both ends of the bracket
    side = np.zeros(servers.shape)
    p = low
    for _ in range(ROOT_STEPS):
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(h_low - h_high > 0, (low * h_high - high * h_low) / (h_high - h_low), low)
        p = np.clip(p, low, high)
        h = erlang_c(servers, rate * (mean_alone - p * reduction)) - p
        if np.all(np.abs(h) < 1e-12):
            break
        right = h > 0  # the root lies above p
        # Illinois: halve the kept end's value when the same end is kept twice running
        h_high = np.where(right & (side > 0), h_high / 2.0, h_high)
        h_low = np.where(~right & (side < 0), h_low / 2.0, h_low)
        low, h_low = np.where(right, p, low), np.where(right, h, h_low)
        high, h_high = np.where(right, high, p), np.where(right, h_high, h)
        side = np.where(right, 1.0, -1.0)
    return p


def _moments(work: np.ndarray, prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E[W], cv^2 of W) over the last axis of `work` (classes), weighted by `prob`."""
    mean = work @ prob
    second = (work**2) @ prob
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(mean > 0, second / np.maximum(mean, 1e-300) ** 2 - 1.0, 0.0)
    return mean, np.maximum(cv2, 0.0)


@dataclass(frozen=True)
class _StepLengths:
    """The busy ranks' chunk steps (module docstring): bin values `x` (ascending), the cumulative
    weight G at each, and `counts[k, q]`, how many of class k's chunks fall in bin q."""

    x: np.ndarray
    cumulative: np.ndarray
    counts: np.ndarray

    @functools.cached_property
    def gaps(self) -> np.ndarray:
        """x_{m+1} - x_m per bin (0 after the last)."""
        return np.diff(self.x, append=self.x[-1])


def _step_lengths(classes: RequestClasses) -> _StepLengths:
    """`_StepLengths` of `classes`: every (class, chunk) step weighted by its class's probability;
    equal lengths merged first (a class split in two by a cache keeps its steps), then, beyond
    STEP_BINS distinct lengths, binned by equal weight, each bin at its weighted mean."""
    steps = classes.prefill_chunk_s
    live = steps > 0
    if not live.any():  # nothing to prefill: one step of no length
        return _StepLengths(x=np.zeros(1), cumulative=np.ones(1), counts=np.zeros((steps.shape[0], 1)))
    lengths, distinct = np.unique(steps[live], return_inverse=True)
    weight = np.bincount(distinct, weights=np.where(live, classes.input_prob[:, None], 0.0)[live])
    if len(lengths) <= STEP_BINS:
        index = np.arange(len(lengths))
    else:
        share = np.cumsum(weight) / max(float(weight.sum()), 1e-300)
        bins = np.minimum((share * STEP_BINS - 1e-9).astype(np.int64), STEP_BINS - 1)
        index = np.searchsorted(np.unique(bins), bins)
    mass = np.bincount(index, weights=weight)
    x = np.bincount(index, weights=weight * lengths) / np.maximum(mass, 1e-300)
    counts = np.zeros((steps.shape[0], len(x)))
    np.add.at(counts, (np.nonzero(live)[0], index[distinct]), 1.0)
    return _StepLengths(x=x, cumulative=np.cumsum(mass) / max(float(mass.sum()), 1e-300), counts=counts)


def _stretch_tail_s(steps: _StepLengths, rho: np.ndarray, ranks: int) -> np.ndarray:
    """Per (row, bin): E[max(s, M)] - s for a step s in the bin, M the longest step of the other
    ranks, each busy with probability rho (a row each): the integral of P(M > u) above s. A class's
    stretch is its chunks' sum, `@ counts.T`."""
    below = (1.0 - rho[:, None] + rho[:, None] * steps.cumulative[None, :]) ** (ranks - 1)  # P(M <= x_m)
    return np.cumsum(((1.0 - below) * steps.gaps)[:, ::-1], axis=1)[:, ::-1]


def _join_wait_s(steps: _StepLengths, rho: np.ndarray, ranks: int, instances: np.ndarray) -> np.ndarray:
    """The mean wait for a step's end when every instance is busy (module docstring):
    P(all busy) E[S^2] / (2 E[S]) / c, S the longest of a busy instance's busy ranks' steps."""
    x = steps.x
    idle = (1.0 - rho[:, None]) ** ranks
    every = (1.0 - rho[:, None] + rho[:, None] * steps.cumulative[None, :]) ** ranks
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.clip((1.0 - every) / np.maximum(1.0 - idle, 1e-300), 0.0, 1.0)  # P(S > x_m | busy)
    next_x = np.append(x[1:], x[-1])
    mean = x[0] + (above * (next_x - x)).sum(axis=1)
    second = x[0] ** 2 + (above * (next_x**2 - x**2)).sum(axis=1)
    busy = 1.0 - idle[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.where(mean > 0, second / (2.0 * np.maximum(mean, 1e-300)), 0.0)
    return busy**instances * residual / np.maximum(instances, 1.0)


def _rank_queue(classes: RequestClasses, c: np.ndarray, lam: np.ndarray, cv2_arrival: float) -> PrefillQueue:
    """The data-parallel-attention pool: c r rank servers, W = A + (L - A) rho + the lockstep's
    stretch (module docstring)."""
    ranks = classes.prefill_ranks
    servers = c * ranks
    alone, loaded, prob = classes.prefill_alone_s, classes.prefill_loaded_s, classes.input_prob
    mean_alone, mean_added = float(alone @ prob), float((loaded - alone) @ prob)
    room = servers - lam * mean_added
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(room > 0, lam * mean_alone / np.maximum(room, 1e-300), 1.0)
    rho = np.clip(rho, 0.0, 1.0).reshape(-1)
    steps = _step_lengths(classes)
    flat_lam, flat_servers = lam.reshape(-1), servers.reshape(-1)
    mean_counts = prob @ steps.counts  # chunks per request in each bin
    for _ in range(LOCKSTEP_PASSES):
        mean_hold = mean_alone + mean_added * rho + _stretch_tail_s(steps, rho, ranks) @ mean_counts
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.clip(flat_lam * mean_hold / np.maximum(flat_servers, 1e-300), 0.0, 1.0)
        done = np.all(np.abs(new - rho) <= 1e-12)
        rho = new
        if done:
            break
    stretch = _stretch_tail_s(steps, rho, ranks) @ steps.counts.T
    holds = alone[None, :] + (loaded - alone)[None, :] * rho[:, None] + stretch
    has_tokens = classes.new_tokens > 0
    join = _join_wait_s(steps, rho, ranks, c.reshape(-1))
    shape = c.shape
    extra = (holds - alone[None, :] + join[:, None] * has_tokens[None, :]).reshape(*shape, len(prob))
    rho = rho.reshape(shape)
    mean, cv2 = _moments(holds.reshape(*shape, len(prob)), prob)
    p_wait, wait_mean = allen_cunneen(servers, lam, mean, cv2, cv2_arrival)
    busy = -np.expm1(ranks * np.log1p(-np.minimum(rho, 1.0 - 1e-15)))  # 1 - (1 - rho)^r
    with np.errstate(divide="ignore", invalid="ignore"):
        busy_ranks = np.where(busy > 0, ranks * rho / np.maximum(busy, 1e-300), 1.0)
    return PrefillQueue(
        p_wait=np.asarray(p_wait, dtype=np.float64),
        wait_mean_s=np.asarray(wait_mean, dtype=np.float64),
        work_s=mean,
        utilization=lam * mean / np.maximum(servers, 1e-12),
        own_extra_s=extra,
        busy_share=np.where(rho >= 1.0, 1.0, busy),
        loaded_share=np.clip((busy_ranks - 1.0) / (ranks - 1.0), 0.0, 1.0),
        work_left_share=1.0 - (1.0 - rho * _continuing_share(classes)) ** (ranks - 1),
    )


def _continuing_share(classes: RequestClasses) -> float:
    """The share of a busy rank's steps that are not its request's last chunk, (E[chunks] - 1) /
    E[chunks] over the requests that prefill: a rank whose request ends with the step leaves no
    work for the next one (the others in the lockstep step end with it)."""
    chunks = (classes.prefill_chunk_s > 0).sum(axis=1).astype(np.float64)
    prefills = chunks > 0
    mean = float(chunks[prefills] @ classes.input_prob[prefills]) / max(
        float(classes.input_prob[prefills].sum()), 1e-300
    )
    return (mean - 1.0) / mean if mean > 0 else 0.0


def _drain_behind_s(classes: RequestClasses, utilization: np.ndarray) -> np.ndarray:
    """With pipeline stages, what a request's last chunk waits in the later stages behind fuller
    steps than its own (0 without stages): alone it drains in (pp - 1) m (its longest own step m,
    `PrefillCost.fill_s`); with the instance busy, the stages ahead still run the steps before it,
    full ones, so it drains in (pp - 1) max(m, s_full): the class's extra is
    (pp - 1) max(s_full - m, 0) x the instance's utilization (mean field; the simulator steps it)."""
    shape = np.shape(utilization)
    drain = classes.prefill_stages - 1
    if drain == 0:
        return np.zeros((*shape, len(classes.input_prob)))
    own = np.asarray(classes.prefill_fill_s, dtype=np.float64) / drain  # m
    behind = np.where(classes.new_tokens > 0, drain * np.maximum(classes.prefill_full_step_s - own, 0.0), 0.0)
    return np.clip(utilization, 0.0, 1.0)[..., None] * behind


def prefill_queue(classes: RequestClasses, count: ArrayLike, rate: ArrayLike, cv2_arrival: float) -> PrefillQueue:
    """The pool of `count` instances at `rate` requests/s, packing as the module docstring says;
    computed once per distinct (count, rate) pair (a capacity search asks the same pool at the same
    rate for every line and routing rule it compares: 16,872 rows of 278 distinct on pdd-agent-64k).
    A pair's figures do not depend on the others asked with it."""
    c, lam = np.broadcast_arrays(np.asarray(count, dtype=np.float64), np.asarray(rate, dtype=np.float64))
    if c.size < 2:
        return _queue(classes, c, lam, cv2_arrival)
    # a pair as one complex number, equal exactly when both parts are (a sort of numbers, not rows);
    # its parts set, not computed (1j * inf is nan + inf j)
    joined = np.empty(c.size, dtype=np.complex128)
    joined.real, joined.imag = c.ravel(), lam.ravel()
    pairs, inverse = np.unique(joined, return_inverse=True)
    if len(pairs) == c.size:
        return _queue(classes, c, lam, cv2_arrival)
    distinct = _queue(classes, pairs.real.copy(), pairs.imag.copy(), cv2_arrival)
    index = inverse.reshape(-1)
    taken = {}
    for field in fields(PrefillQueue):
        value = getattr(distinct, field.name)
        taken[field.name] = value[index].reshape(*c.shape, *value.shape[1:])
    return PrefillQueue(**taken)


def _queue(classes: RequestClasses, c: np.ndarray, lam: np.ndarray, cv2_arrival: float) -> PrefillQueue:
    """`prefill_queue` of the (count, rate) pairs `c`, `lam` (one shape)."""
    if classes.prefill_ranks > 1:
        return _rank_queue(classes, c, lam, cv2_arrival)
    shape = c.shape
    fixed, variable = _step_parts(classes)
    per_instance = lam / np.maximum(c, 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.where(per_instance * variable < 1.0, per_instance * fixed / (1.0 - per_instance * variable), np.inf)
    # W = A - p d per class, d = (A - P) (1 - g): its moments are polynomials in p
    alone = classes.prefill_alone_s
    prob = classes.input_prob
    d = (alone - classes.prefill_work_s)[None, :] * (1.0 - _shared_fraction(classes, mu))
    mean_a, second_a = float(alone @ prob), float((alone**2) @ prob)
    mean_d, cross, second_d = (
        (d @ prob).reshape(shape),
        ((alone[None, :] * d) @ prob).reshape(shape),
        ((d**2) @ prob).reshape(shape),
    )
    p = _solve_waiting(c, lam, mean_a, mean_d)
    mean = mean_a - p * mean_d
    second = second_a - 2.0 * p * cross + p**2 * second_d
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(mean > 0, second / np.maximum(mean, 1e-300) ** 2 - 1.0, 0.0)
    p_wait, wait_mean = allen_cunneen(c, lam, mean, cv2, cv2_arrival)
    p_wait = np.asarray(p_wait, dtype=np.float64)
    utilization = lam * mean / np.maximum(c, 1e-12)
    return PrefillQueue(
        p_wait=p_wait,
        wait_mean_s=np.asarray(wait_mean, dtype=np.float64),
        work_s=mean,
        utilization=utilization,
        own_extra_s=_drain_behind_s(classes, utilization),
        busy_share=utilization,
        loaded_share=p_wait,
        work_left_share=p_wait,
    )
