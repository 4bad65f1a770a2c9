"""Queueing approximations used by the closed-form evaluator.

- Erlang C: probability that an arrival waits in an M/M/c queue with offered load a = lambda * E[S].
- Allen-Cunneen (G/G/c): wait mean  E[W] = C(c, a) * E[S] / (c (1 - rho)) * (ca^2 + cs^2) / 2, with
  rho = a / c; waits are modelled as 0 with probability 1 - C(c, a), else exponential with mean
  E[S] / (c (1 - rho)) * (ca^2 + cs^2) / 2. For c = 1 and deterministic service (cs = 0, ca = 1)
  this is exactly the M/D/1 mean wait rho * S / (2 (1 - rho)).
- Processor sharing (M/G/1-PS): a job of size x on a server of rate C at load rho takes
  x / (C (1 - rho)) on average.
Percentiles of a sum "random wait + per-class fixed delay" are found by bisection on the exact
survival function of the mixture.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.support.frozen import read_only
from pddplan.support.special import log_factorials


@functools.cache
def _log_factorials(top: int) -> np.ndarray:
    """log(k!) for k = 0..top (computed once per size: Erlang C is called in tight loops)."""
    (table,) = read_only(log_factorials(top))
    return table


def erlang_c(servers: ArrayLike, offered_load: ArrayLike) -> np.ndarray:
    """P(wait > 0) in M/M/c with c servers and offered load a (Erlangs); 1 when a >= c.

    Erlang B in log space, B = (a^c / c!) / sum_{k<=c} a^k / k!, then C = c B / (c - a (1 - B));
    vectorized over arrays of c and a (no loop over servers). The terms a^k / k! peak at k = a and
    fall as e^{-(k - a)^2 / 2a} around it, so each row sums only the k within ERLANG_WINDOW
    standard deviations of min(a, c) (the rest add less than 1e-30 of the sum): pools of tens of
    thousands of servers cost a few thousand terms, not all of theirs.
    """
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(offered_load, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    shape = c.shape
    c_flat = np.rint(c.ravel())
    a_flat = a.ravel()
    centre = np.minimum(np.maximum(a_flat, 0.0), c_flat)
    spread = ERLANG_WINDOW * np.sqrt(centre) + ERLANG_WINDOW
    low = np.maximum(np.floor(centre - spread), 0.0)
    high = np.minimum(np.ceil(centre + spread), c_flat)
    width = int((high - low).max(initial=0))
    top = int(c_flat.max(initial=0))
    table = _log_factorials(top)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.log(np.maximum(a_flat, 1e-300))
        log_top = c_flat * log_a - table[c_flat.astype(np.int64)]
        if 2 * width < top:  # the windows save most terms: each row's own k, gathered from the table
            k = low[:, None] + np.arange(width + 1, dtype=np.float64)[None, :]
            log_terms = k * log_a[:, None] - table[np.minimum(k, top).astype(np.int64)]
        else:  # every k up to the largest c, the table broadcast (cheaper than the gather)
            k, high = np.arange(top + 1, dtype=np.float64)[None, :], c_flat
            log_terms = k * log_a[:, None] - table[None, :]
    log_terms = np.where(k <= high[:, None], log_terms, -np.inf)
    peak = log_terms.max(axis=1, keepdims=True)
    log_total = peak[:, 0] + np.log(np.exp(log_terms - peak).sum(axis=1))
    blocking = np.exp(log_top - log_total)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = c_flat * blocking / (c_flat - a_flat * (1.0 - blocking))
    result = np.where(a_flat >= c_flat, 1.0, np.where(a_flat <= 0, 0.0, np.clip(wait, 0.0, 1.0)))
    return result.reshape(shape)


#: `erlang_c` sums the terms within this many standard deviations (sqrt(a)) of the largest, plus
#: as many terms again: beyond, each is below e^{-ERLANG_WINDOW^2 / 2} (e^{-72}) of the peak
ERLANG_WINDOW = 12.0


def allen_cunneen(
    servers: ArrayLike, rate: ArrayLike, mean_service: ArrayLike, cv2_service: ArrayLike, cv2_arrival: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(P(wait > 0), mean of the wait given it is positive) for a G/G/c queue.

    Infinite conditional mean when the queue is unstable (rho >= 1).
    """
    c = np.asarray(servers, dtype=np.float64)
    lam = np.asarray(rate, dtype=np.float64)
    s = np.asarray(mean_service, dtype=np.float64)
    load = lam * s
    rho = load / np.maximum(c, 1e-12)
    p_wait = erlang_c(c, load)
    variability = (np.asarray(cv2_arrival, dtype=np.float64) + np.asarray(cv2_service, dtype=np.float64)) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = np.where(rho < 1.0, s / (c * (1.0 - rho)) * variability, np.inf)
    return p_wait, conditional


def md1_mean_wait(rate: float, service: float) -> float:
    """Mean wait in M/D/1: rho * S / (2 (1 - rho)), rho = lambda * S."""
    rho = rate * service
    return math.inf if rho >= 1 else rho * service / (2.0 * (1.0 - rho))


def mm1_mean_wait(rate: float, service: float) -> float:
    """Mean wait in M/M/1: rho * S / (1 - rho)."""
    rho = rate * service
    return math.inf if rho >= 1 else rho * service / (1.0 - rho)


def ps_response(size: ArrayLike, capacity: float, load: float) -> np.ndarray:
    """Mean response time of a job of `size` in M/G/1 processor sharing: x / (C (1 - rho))."""
    x = np.asarray(size, dtype=np.float64)
    if load >= 1:
        return np.full(x.shape, np.inf)
    return x / (capacity * (1.0 - load))


def tail_shares(
    delays: np.ndarray, weights: np.ndarray, p_wait: np.ndarray, wait_mean: np.ndarray, targets: ArrayLike
) -> np.ndarray:
    """(row, target): the weighted share of a row's paths over each target,
    s_j = sum_k w_k P(W + d_k > t_j) = sum_{d_k > t_j} w_k + p sum_{d_k <= t_j} w_k e^{-(t_j - d_k)/m},
    W = 0 w.p. 1 - p, else exponential of mean m (one p and m per row; the wait is 0 when m = 0,
    and every path is over when m is infinite): `wait_survival` of one wait, summed with the
    weights, for every target at once. One exponential per path serves all targets: with t_1 the least,
    e^{-(t_j - d)/m} = e^{-(t_1 - d)/m} e^{-(t_j - t_1)/m} for d <= t_1, and only the paths
    between t_1 and t_j take one of their own (the capacity searches evaluate millions of paths)."""
    p = np.asarray(p_wait, dtype=np.float64)
    m = np.asarray(wait_mean, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    if not len(t):
        return np.zeros((len(p), 0))
    waits = (m > 0) & np.isfinite(m)
    scale = np.where(waits, m, 1.0)[:, None]
    least = float(t.min())
    near = delays - least  # then (d - t_1) / m, clipped at 0, exponentiated: the paths within t_1
    # d > t_1 (the difference of two unequal floats is never 0) or d NaN: not within t_1, and
    # between t_1 and a target only when d <= that target
    beyond = ~(near <= 0.0)
    np.minimum(near, 0.0, out=near)
    near /= scale
    np.exp(near, out=near)
    np.copyto(near, 0.0, where=beyond)
    base = np.einsum("rk,rk->r", near, weights)
    out = np.empty((len(p), len(t)))
    for j, target in enumerate(t):
        below = delays <= target
        over = np.einsum("rk,rk->r", ~below, weights)  # a NaN delay counts as over
        inside = base * np.exp((least - target) / scale[:, 0])
        if target > least:
            rows, paths = np.nonzero(beyond & below)
            between = weights[rows, paths] * np.exp((delays[rows, paths] - target) / scale[rows, 0])
            inside = inside + np.bincount(rows, between, minlength=len(p))
        out[:, j] = over + np.where(waits, p * inside, 0.0)
    out[np.isinf(m)] = weights.sum(axis=1)[np.isinf(m), None]
    return out


def wait_survival(
    slack: ArrayLike, p_wait: float, wait_mean: float, p_wait2: ArrayLike = 0.0, wait_mean2: ArrayLike = 0.0
) -> np.ndarray:
    """P(W1 + W2 > slack) for independent waits W = 0 w.p. 1 - p, else exponential with its mean.

    One wait: p1 e^{-y/m1}. Two: p1(1-p2) e^{-y/m1} + (1-p1) p2 e^{-y/m2} + p1 p2 H(y), H the
    survival of the sum of both exponentials, (m1 e^{-y/m1} - m2 e^{-y/m2}) / (m1 - m2)
    ((1 + y/m) e^{-y/m} when m1 = m2). 1 for slack < 0; 1 everywhere if a mean is infinite.
    """
    return TwoWaits(p_wait, wait_mean, p_wait2, wait_mean2).survival(slack)


class TwoWaits:
    """`wait_survival` with everything that does not depend on the slack computed once: a
    quantile search evaluates the same waits at many slacks."""

    def __init__(self, p_wait: float, wait_mean: float, p_wait2: ArrayLike = 0.0, wait_mean2: ArrayLike = 0.0) -> None:
        p2 = np.asarray(p_wait2, dtype=np.float64)
        m2 = np.asarray(wait_mean2, dtype=np.float64)
        self.infinite = not math.isfinite(wait_mean)
        p1 = p_wait if wait_mean > 0 else 0.0
        m1 = np.float64(wait_mean)
        self.m1, self.m2 = m1, m2
        self.m1_safe = m1 if m1 > 0 else np.float64(1.0)
        self.m2_positive = m2 > 0
        self.m2_safe = np.where(self.m2_positive, m2, 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            self.close = np.abs(m1 - m2) <= 1e-9 * np.maximum(m1, m2)
            self.gap = m1 - m2
        self.both_positive = (m1 > 0) & self.m2_positive
        self.c1, self.c2, self.c3 = p1 * (1 - p2), (1 - p1) * p2, p1 * p2
        self.finite2 = np.isfinite(m2)

    def survival(self, slack: ArrayLike) -> np.ndarray:
        """P(W1 + W2 > slack), elementwise over `slack` (broadcast against the second wait's arrays)."""
        y = np.asarray(slack, dtype=np.float64)
        shape = np.broadcast_shapes(y.shape, self.m2.shape, np.shape(self.c1))
        if self.infinite:
            return np.ones(shape)
        yy = np.maximum(y, 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            e1 = np.exp(-yy / self.m1_safe) if self.m1 > 0 else np.zeros(yy.shape)
            e2 = np.where(self.m2_positive, np.exp(-yy / self.m2_safe), 0.0)
            hypo = np.where(self.close, (1.0 + yy / self.m1_safe) * e1, (self.m1 * e1 - self.m2 * e2) / self.gap)
        hypo = np.where(self.both_positive, hypo, e1 if self.m1 > 0 else e2)
        tail = self.c1 * e1 + self.c2 * e2 + self.c3 * hypo
        tail = np.where(self.finite2, tail, 1.0)
        return np.where(y < 0, 1.0, tail)


def mixture_survival(
    t: ArrayLike,
    delays: np.ndarray,
    weights: np.ndarray,
    p_wait: float,
    wait_mean: float,
    p_wait2: ArrayLike = 0.0,
    wait_mean2: ArrayLike = 0.0,
) -> np.ndarray:
    """P(W + D > t): D takes delays[i] with weights[i]; W is the prefill wait plus, per point, an
    optional second wait (a decoder's slot wait)."""
    waits = TwoWaits(
        p_wait, wait_mean, np.broadcast_to(p_wait2, delays.shape), np.broadcast_to(wait_mean2, delays.shape)
    )
    return _mixture_survival(t, delays, weights, waits)


def _mixture_survival(t: ArrayLike, delays: np.ndarray, weights: np.ndarray, waits: TwoWaits) -> np.ndarray:
    t_arr = np.asarray(t, dtype=np.float64)
    return waits.survival(t_arr[..., None] - delays) @ weights


def merged_points(
    delays: np.ndarray, weights: np.ndarray, p_wait2: np.ndarray, wait_mean2: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(delays, weights, p2, mean2) with the points of equal (delay, p2, mean2) merged into one of
    their summed weight, and the points of no weight dropped (but NaN delays, kept apart):
    sum_k w_k S(t - d_k) needs one term per distinct point. A TTFT mixture repeats its points
    (output classes that share a first token, a pipeline's masked weights): 26,624 points of
    1,502 distinct on chat-short-lowhit."""
    d, w = delays.ravel(), weights.ravel()
    p2, m2 = np.broadcast_to(p_wait2, delays.shape).ravel(), np.broadcast_to(wait_mean2, delays.shape).ravel()
    keep = (w != 0) | np.isnan(d)
    order = np.lexsort((m2[keep], p2[keep], d[keep]))
    d, w, p2, m2 = d[keep][order], w[keep][order], p2[keep][order], m2[keep][order]
    if not len(d):
        return d, w, p2, m2
    starts = np.flatnonzero(np.concatenate(([True], (d[1:] != d[:-1]) | (p2[1:] != p2[:-1]) | (m2[1:] != m2[:-1]))))
    return d[starts], np.add.reduceat(w, starts), p2[starts], m2[starts]


def mixture_quantiles(
    quantiles: ArrayLike,
    delays: np.ndarray,
    weights: np.ndarray,
    p_wait: float,
    wait_mean: float,
    p_wait2: ArrayLike = 0.0,
    wait_mean2: ArrayLike = 0.0,
) -> np.ndarray:
    """Quantiles of W + D (see `mixture_survival`), by bisection to 1 ms or 0.1%: `pools_quantiles`
    of this one pool.

    Infinite delays (an unstable stage) make every quantile above their share infinite.
    """
    pool = WaitedDelays(
        delays,
        weights,
        p_wait,
        wait_mean,
        np.asarray(p_wait2, dtype=np.float64),
        np.asarray(wait_mean2, dtype=np.float64),
    )
    return pools_quantiles(quantiles, [(1.0, pool)])


def _bisected(
    q: np.ndarray, survival: Callable[[np.ndarray], np.ndarray], high_start: float, inf_share: float
) -> np.ndarray:
    """The q-quantiles of a delay whose P(T > t) is `survival(t)`: the t with survival(t) = 1 - q,
    by bisection on [0, high_start] to 1 ms or 0.1%; infinite where 1 - q is below `inf_share`
    (the share of infinite delays)."""
    low = np.zeros(q.shape)
    high = np.full(q.shape, high_start)
    for _ in range(60):
        mid = (low + high) / 2.0
        above = np.asarray(survival(mid)) > 1.0 - q
        low = np.where(above, mid, low)
        high = np.where(above, high, mid)
        if np.all(high - low <= np.maximum(1e-3, 1e-3 * high)):
            break
    return np.where(1.0 - q < inf_share, np.inf, high)


@dataclass(frozen=True)
class WaitedDelays:
    """One pool's W + D (see `mixture_survival`): its delays and their weights, its prefill wait
    (p, mean) and, per point, its second wait (p2, mean2)."""

    delays: np.ndarray
    weights: np.ndarray
    p_wait: float
    wait_mean: float
    p_wait2: np.ndarray
    wait_mean2: np.ndarray


def pools_quantiles(quantiles: ArrayLike, pools: list[tuple[float, WaitedDelays]]) -> np.ndarray:
    """Quantiles of a request's W + D when it is pool i's with probability s_i (pairs (s_i, pool)):
    P(T > t) = sum_i s_i P(W_i + D_i > t), by bisection (`_bisected`). An unstable pool
    (an infinite wait mean) makes every quantile infinite."""
    q = np.asarray(quantiles, dtype=np.float64)
    parts = []
    inf_share = 0.0
    high_start = 1e-3
    for share, pool in pools:
        weights = pool.weights / pool.weights.sum()
        mean2 = np.broadcast_to(np.asarray(pool.wait_mean2, dtype=np.float64), pool.delays.shape)
        if not math.isfinite(pool.wait_mean) or not np.all(np.isfinite(mean2)):
            return np.full(q.shape, np.inf)
        finite = np.isfinite(pool.delays)
        inf_share += share * float(weights[~finite].sum())
        spread = max(pool.wait_mean, 0.0) + float(mean2.max(initial=0.0))
        high_start = max(high_start, float(pool.delays[finite].max(initial=0.0)) + spread * 50.0 + 1e-3)
        delays, weights, p2, mean2 = merged_points(
            pool.delays, weights, np.asarray(pool.p_wait2, dtype=np.float64), mean2
        )
        parts.append((share, delays, weights, TwoWaits(pool.p_wait, pool.wait_mean, p2, mean2)))

    def survival(t: np.ndarray) -> np.ndarray:
        return np.asarray(sum(share * _mixture_survival(t, delays, w, waits) for share, delays, w, waits in parts))

    return _bisected(q, survival, high_start, inf_share)
