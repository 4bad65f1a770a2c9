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

import math

import numpy as np
from numpy.typing import ArrayLike


def erlang_c(servers: ArrayLike, offered_load: ArrayLike) -> np.ndarray:
    """P(wait > 0) in M/M/c with c servers and offered load a (Erlangs); 1 when a >= c.

    Computed through the Erlang B recursion B(k) = a B(k-1) / (k + a B(k-1)), then
    C = c B / (c - a (1 - B)); vectorized over arrays of c and a.
    """
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(offered_load, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    blocking = np.ones(c.shape)
    top = int(np.max(c, initial=0))
    for k in range(1, top + 1):
        step = a * blocking / (k + a * blocking)
        blocking = np.where(k <= c, step, blocking)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = c * blocking / (c - a * (1.0 - blocking))
    return np.where(a >= c, 1.0, np.clip(wait, 0.0, 1.0))


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


def wait_survival(slack: ArrayLike, p_wait: float, wait_mean: float) -> np.ndarray:
    """P(W > slack) for the wait W: 1 below zero, else p_wait * exp(-slack / mean)."""
    y = np.asarray(slack, dtype=np.float64)
    if not math.isfinite(wait_mean):
        tail = np.ones_like(y)
    elif wait_mean <= 0 or p_wait <= 0:
        tail = np.zeros_like(y)
    else:
        tail = p_wait * np.exp(-np.maximum(y, 0.0) / wait_mean)
    return np.where(y < 0, 1.0, tail)


def mixture_survival(
    t: ArrayLike, delays: np.ndarray, weights: np.ndarray, p_wait: float, wait_mean: float
) -> np.ndarray:
    """P(W + D > t) where D takes value delays[i] with weights[i] and W is the exponential-tail wait."""
    t_arr = np.asarray(t, dtype=np.float64)
    return wait_survival(t_arr[..., None] - delays, p_wait, wait_mean) @ weights


def mixture_quantiles(
    quantiles: ArrayLike, delays: np.ndarray, weights: np.ndarray, p_wait: float, wait_mean: float
) -> np.ndarray:
    """Quantiles of W + D (see `mixture_survival`), by bisection to 1 ms or 0.1%.

    Infinite delays (an unstable stage) make every quantile above their share infinite.
    """
    q = np.asarray(quantiles, dtype=np.float64)
    weights = weights / weights.sum()
    finite = np.isfinite(delays)
    inf_share = float(weights[~finite].sum())
    if not math.isfinite(wait_mean):
        return np.full(q.shape, np.inf)
    low = np.zeros(q.shape)
    high = np.full(q.shape, float(delays[finite].max(initial=0.0)) + max(wait_mean, 0.0) * 50.0 + 1e-3)
    for _ in range(60):
        mid = (low + high) / 2.0
        above = mixture_survival(mid, delays, weights, p_wait, wait_mean) > 1.0 - q
        low = np.where(above, mid, low)
        high = np.where(above, high, mid)
        if np.all(high - low <= np.maximum(1e-3, 1e-3 * high)):
            break
    return np.where(1.0 - q < inf_share, np.inf, high)
