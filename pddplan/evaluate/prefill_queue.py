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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.evaluate.classes import RequestClasses
from pddplan.evaluate.queueing import allen_cunneen, erlang_c

ROOT_STEPS = 8  # at most; Illinois reaches |h| < 1e-12 in 5-6 steps on these smooth, monotone roots


@dataclass(frozen=True)
class PrefillQueue:
    """The pool at a rate (arrays broadcast like `count` and `rate`): probability of waiting, mean
    wait given a wait, mean work per request E[W] and utilization lam E[W] / c."""

    p_wait: np.ndarray
    wait_mean_s: np.ndarray
    work_s: np.ndarray
    utilization: np.ndarray


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


def prefill_queue(classes: RequestClasses, count: ArrayLike, rate: ArrayLike, cv2_arrival: float) -> PrefillQueue:
    """The pool of `count` instances at `rate` requests/s, packing as the module docstring says."""
    c, lam = np.broadcast_arrays(np.asarray(count, dtype=np.float64), np.asarray(rate, dtype=np.float64))
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
    return PrefillQueue(
        p_wait=np.asarray(p_wait, dtype=np.float64),
        wait_mean_s=np.asarray(wait_mean, dtype=np.float64),
        work_s=mean,
        utilization=lam * mean / np.maximum(c, 1e-12),
    )
