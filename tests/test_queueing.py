"""Closed forms of the evaluator's queueing layer (pddplan.evaluate.queueing).

Erlang C against textbook values and an independent Erlang-B recursion; Allen-Cunneen reducing to
the M/D/1 and M/M/1 means; processor sharing; the survival function of "0 w.p. 1-p, else
exponential" waits (single, and the sum of two); and the bisection quantiles of a mixture.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.evaluate.queueing import (
    allen_cunneen,
    erlang_c,
    md1_mean_wait,
    merged_points,
    mixture_quantiles,
    mixture_survival,
    mm1_mean_wait,
    ps_response,
    tail_shares,
    wait_survival,
)


def erlang_c_reference(c: int, a: float) -> float:
    """Erlang C from the textbook sum: (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a))."""
    if a >= c:
        return 1.0
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


# -- Erlang C ------------------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.5, 0.8, 0.99])
def test_erlang_c_single_server_is_rho(rho: float) -> None:
    """M/M/1: an arrival waits with probability rho."""
    assert float(erlang_c(1, rho)) == pytest.approx(rho, rel=1e-12)


def test_erlang_c_known_values() -> None:
    # c = 2, a = 1: C = (1/2 * 2) / (1 + 1 + 1) = 1/3
    assert float(erlang_c(2, 1.0)) == pytest.approx(1 / 3, rel=1e-12)
    # c = 3, a = 2: (8/6 * 3) / (1 + 2 + 2 + 4) = 4/9
    assert float(erlang_c(3, 2.0)) == pytest.approx(4 / 9, rel=1e-12)
    # c = 2, a = 1.5 (rho = 0.75): (1.125 * 4) / (1 + 1.5 + 4.5) = 9/14
    assert float(erlang_c(2, 1.5)) == pytest.approx(9 / 14, rel=1e-12)


@pytest.mark.parametrize("c", [1, 2, 3, 5, 8, 16, 40, 100])
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_erlang_c_matches_textbook_sum(c: int, rho: float) -> None:
    a = rho * c
    assert float(erlang_c(c, a)) == pytest.approx(erlang_c_reference(c, a), rel=1e-9)


def test_erlang_c_is_vectorized_and_broadcasts() -> None:
    c = np.array([1, 2, 3, 8])
    a = np.array([0.5, 1.0, 2.0, 6.0])
    out = erlang_c(c, a)
    assert out.shape == (4,)
    expected = [erlang_c_reference(int(ci), float(ai)) for ci, ai in zip(c, a, strict=True)]
    np.testing.assert_allclose(out, expected, rtol=1e-9)
    grid = erlang_c(np.array([[1], [2], [4]]), np.array([0.2, 0.5, 0.9]))
    assert grid.shape == (3, 3)
    assert grid[0, 1] == pytest.approx(0.5)


def test_erlang_c_edges() -> None:
    # overloaded or critically loaded: every arrival waits
    assert float(erlang_c(1, 1.0)) == 1.0
    assert float(erlang_c(4, 7.5)) == 1.0
    # no load: nobody waits
    assert float(erlang_c(3, 0.0)) == 0.0
    # more servers at the same load never raise the waiting probability
    values = erlang_c(np.arange(2, 30), np.full(28, 1.8))
    assert np.all(np.diff(values) <= 1e-15)
    assert np.all((values >= 0) & (values <= 1))


def test_erlang_c_large_pool_is_finite() -> None:
    """Decoder slot pools have thousands of 'servers'; the formula must not overflow."""
    value = float(erlang_c(4000, 3900.0))
    assert 0.0 < value < 1.0
    assert math.isfinite(value)


# -- Allen-Cunneen -----------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.7, 0.95])
def test_allen_cunneen_reduces_to_md1(rho: float) -> None:
    """c = 1, deterministic service (cs^2 = 0), Poisson arrivals (ca^2 = 1): M/D/1 mean wait."""
    service = 0.37
    rate = rho / service
    p_wait, conditional = allen_cunneen(1, rate, service, 0.0, 1.0)
    mean_wait = float(p_wait) * float(conditional)
    assert float(p_wait) == pytest.approx(rho)
    assert mean_wait == pytest.approx(rho * service / (2 * (1 - rho)), rel=1e-12)
    assert mean_wait == pytest.approx(md1_mean_wait(rate, service), rel=1e-12)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.7, 0.95])
def test_allen_cunneen_reduces_to_mm1(rho: float) -> None:
    """c = 1, exponential service and arrivals: M/M/1 mean wait rho S / (1 - rho), which is exact."""
    service = 1.3
    rate = rho / service
    p_wait, conditional = allen_cunneen(1, rate, service, 1.0, 1.0)
    assert float(p_wait) * float(conditional) == pytest.approx(rho * service / (1 - rho), rel=1e-12)
    assert float(p_wait) * float(conditional) == pytest.approx(mm1_mean_wait(rate, service), rel=1e-12)
    # M/M/1: given a wait, it is exponential with mean S / (1 - rho)
    assert float(conditional) == pytest.approx(service / (1 - rho), rel=1e-12)


def test_allen_cunneen_mmc_is_exact_erlang_c_mean() -> None:
    """M/M/c: E[W] = C(c, a) S / (c (1 - rho))."""
    c, service, rate = 4, 2.0, 1.6  # a = 3.2, rho = 0.8
    p_wait, conditional = allen_cunneen(c, rate, service, 1.0, 1.0)
    expected = erlang_c_reference(c, rate * service) * service / (c * (1 - 0.8))
    assert float(p_wait) * float(conditional) == pytest.approx(expected, rel=1e-9)


def test_allen_cunneen_unstable_queue_has_infinite_wait() -> None:
    p_wait, conditional = allen_cunneen(2, 1.0, 2.5, 0.5, 1.0)  # rho = 1.25
    assert float(p_wait) == 1.0
    assert math.isinf(float(conditional))
    assert math.isinf(md1_mean_wait(1.0, 1.0))
    assert math.isinf(mm1_mean_wait(2.0, 1.0))


def test_allen_cunneen_scales_with_variability() -> None:
    """The G/G/c wait is proportional to (ca^2 + cs^2) / 2."""
    _, base = allen_cunneen(2, 1.0, 1.5, 1.0, 1.0)
    _, bursty = allen_cunneen(2, 1.0, 1.5, 1.0, 3.0)
    assert float(bursty) == pytest.approx(2.0 * float(base), rel=1e-12)


# -- processor sharing -------------------------------------------------------------------------


def test_ps_response_is_size_over_spare_capacity() -> None:
    sizes = np.array([1e6, 5e7, 2e9])
    out = ps_response(sizes, capacity=1.25e9, load=0.6)
    np.testing.assert_allclose(out, sizes / (1.25e9 * 0.4), rtol=1e-12)
    assert np.all(np.isinf(ps_response(sizes, 1.25e9, 1.0)))


# -- wait survival and mixture quantiles -------------------------------------------------------


def test_wait_survival_single_exponential() -> None:
    y = np.array([-1.0, 0.0, 0.5, 2.0, 10.0])
    out = wait_survival(y, 0.4, 2.0)
    expected = np.where(y < 0, 1.0, 0.4 * np.exp(-np.maximum(y, 0) / 2.0))
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    # no wait at all
    np.testing.assert_allclose(wait_survival(np.array([0.0, 1.0]), 0.7, 0.0), [0.0, 0.0])
    # an infinite mean (unstable queue): the wait exceeds everything
    np.testing.assert_allclose(wait_survival(np.array([0.0, 1e9]), 0.5, math.inf), [1.0, 1.0])


def test_tail_shares_by_hand() -> None:
    """s_j = sum_{d > t_j} w + p sum_{d <= t_j} w e^{-(t_j - d)/m} per row, at targets 1 and 3 s."""
    delays = np.array([[0.0, 2.0, 4.0], [0.0, 2.0, 4.0], [0.0, 2.0, 4.0], [1.0, 3.0, 5.0]])
    weights = np.tile([0.5, 0.3, 0.2], (4, 1))
    p = np.array([0.4, 0.4, 0.4, 0.5])
    m = np.array([2.0, 0.0, math.inf, 1.0])
    out = tail_shares(delays, weights, p, m, np.array([1.0, 3.0]))
    e = math.exp
    expected = [
        [0.2 * e(-0.5) + 0.3 + 0.2, 0.2 * e(-1.5) + 0.12 * e(-0.5) + 0.2],
        [0.5, 0.2],  # no wait: only the paths over the target
        [1.0, 1.0],  # an unstable queue: every path is over
        [0.25 + 0.3 + 0.2, 0.25 * e(-2.0) + 0.15 + 0.2],  # a path at its target waits for nothing more
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert tail_shares(delays, weights, p, m, np.array([])).shape == (4, 0)
    # an unusable path (a NaN delay) is over every target, never under it
    delays[0, 0] = math.nan
    assert tail_shares(delays, weights, p, m, np.array([1.0, 3.0]))[0] == pytest.approx([1.0, 0.12 * e(-0.5) + 0.7])


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    targets=st.lists(st.floats(0.0, 30.0), min_size=1, max_size=3),
)
def test_tail_shares_is_the_weighted_survival_of_each_path(seed: int, targets: list[float]) -> None:
    """Against `wait_survival` path by path, in any target order, with zero and infinite means."""
    rng = np.random.default_rng(seed)
    rows, paths = 6, 9
    delays = rng.gamma(2.0, 4.0, (rows, paths))
    delays[0, :3] = targets[0]  # paths exactly at a target
    weights = rng.dirichlet(np.ones(paths), rows)
    p = rng.uniform(0.0, 1.0, rows)
    m = rng.uniform(1e-3, 20.0, rows)
    m[1], m[2], p[3] = 0.0, math.inf, 0.0
    out = tail_shares(delays, weights, p, m, np.array(targets))
    for r in range(rows):
        for j, target in enumerate(targets):
            reference = float(weights[r] @ wait_survival(target - delays[r], float(p[r]), float(m[r])))
            assert out[r, j] == pytest.approx(reference, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("m1", "m2"), [(1.0, 3.0), (2.0, 2.0), (0.5, 0.5000000001)])
def test_wait_survival_of_two_waits_matches_closed_form(m1: float, m2: float) -> None:
    """P(W1 + W2 > y) for W_i = 0 w.p. 1 - p_i else Exp(m_i): the four cases by hand."""
    p1, p2 = 0.6, 0.3
    y = np.linspace(0.0, 12.0, 25)
    e1, e2 = np.exp(-y / m1), np.exp(-y / m2)
    # Erlang-2 survival for equal means, hypoexponential otherwise
    both = (1 + y / m1) * e1 if abs(m1 - m2) < 1e-6 else (m1 * e1 - m2 * e2) / (m1 - m2)
    expected = p1 * (1 - p2) * e1 + (1 - p1) * p2 * e2 + p1 * p2 * both
    np.testing.assert_allclose(wait_survival(y, p1, m1, p2, m2), expected, rtol=1e-6, atol=1e-12)


def test_wait_survival_of_two_waits_agrees_with_monte_carlo() -> None:
    rng = np.random.default_rng(7)
    n = 400_000
    p1, m1, p2, m2 = 0.5, 1.0, 0.4, 2.5
    w = np.where(rng.random(n) < p1, rng.exponential(m1, n), 0.0) + np.where(
        rng.random(n) < p2, rng.exponential(m2, n), 0.0
    )
    for y in (0.5, 1.0, 3.0, 6.0):
        assert float(wait_survival(np.array([y]), p1, m1, p2, m2)[0]) == pytest.approx((w > y).mean(), abs=3e-3)


def test_mixture_quantiles_of_a_pure_exponential_wait() -> None:
    """W ~ Exp(m) w.p. 1 (no fixed delay): the q-quantile is -m ln(1 - q)."""
    m = 2.0
    q = mixture_quantiles([0.5, 0.9, 0.99], np.array([0.0]), np.array([1.0]), 1.0, m)
    expected = -m * np.log(1 - np.array([0.5, 0.9, 0.99]))
    # bisection stops at 1 ms or 0.1%
    np.testing.assert_allclose(q, expected, rtol=1.5e-3, atol=1.5e-3)


def test_mixture_quantiles_of_fixed_delay_plus_wait() -> None:
    """D + W with W = 0 w.p. 1 - p else Exp(m): q-quantile D + m ln(p / (1 - q)) when p > 1 - q, else D."""
    d, p, m = 1.5, 0.3, 4.0
    q = mixture_quantiles([0.5, 0.9, 0.99], np.array([d]), np.array([1.0]), p, m)
    assert q[0] == pytest.approx(d, abs=1.5e-3)  # P(W > 0) = 0.3 < 0.5: the median has no wait
    assert q[1] == pytest.approx(d + m * math.log(p / 0.1), rel=1.5e-3)
    assert q[2] == pytest.approx(d + m * math.log(p / 0.01), rel=1.5e-3)


def test_mixture_quantiles_of_discrete_delays() -> None:
    """No waits: the quantiles of the delay mixture itself (10% at 5 s, 90% at 1 s)."""
    delays = np.array([1.0, 5.0])
    weights = np.array([9.0, 1.0])  # normalized inside
    q = mixture_quantiles([0.5, 0.85, 0.95], delays, weights, 0.0, 0.0)
    np.testing.assert_allclose(q, [1.0, 1.0, 5.0], atol=1.5e-3, rtol=1.5e-3)
    survival = mixture_survival(np.array([0.5, 2.0, 6.0]), delays, weights / weights.sum(), 0.0, 0.0)
    np.testing.assert_allclose(survival, [1.0, 0.1, 0.0], atol=1e-12)


def test_mixture_quantiles_with_infinite_delay_share() -> None:
    """An unstable class holding 5% of the weight makes every quantile above 95% infinite."""
    delays = np.array([1.0, math.inf])
    weights = np.array([0.95, 0.05])
    q = mixture_quantiles([0.5, 0.9, 0.99], delays, weights, 0.0, 0.0)
    assert q[0] == pytest.approx(1.0, abs=1.5e-3)
    assert q[1] == pytest.approx(1.0, abs=1.5e-3)
    assert math.isinf(q[2])


def test_mixture_quantiles_with_unstable_wait_is_infinite() -> None:
    q = mixture_quantiles([0.5, 0.9], np.array([1.0]), np.array([1.0]), 1.0, math.inf)
    assert np.all(np.isinf(q))


def test_mixture_quantiles_are_ordered_and_consistent_with_survival() -> None:
    rng = np.random.default_rng(3)
    delays = rng.uniform(0.1, 5.0, 30)
    weights = rng.uniform(0.1, 1.0, 30)
    weights /= weights.sum()
    slot_p = rng.uniform(0.0, 0.5, 30)
    slot_m = rng.uniform(0.0, 2.0, 30)
    qs = np.array([0.5, 0.9, 0.99])
    q = mixture_quantiles(qs, delays, weights, 0.4, 0.8, slot_p, slot_m)
    assert np.all(np.diff(q) >= 0)
    survival = mixture_survival(q, delays, weights, 0.4, 0.8, slot_p, slot_m)
    # at the returned point the tail is at most 1 - q, and just below it still above (to the tolerance)
    assert np.all(survival <= 1 - qs + 1e-9)
    below = mixture_survival(q - np.maximum(2e-3, 2e-3 * q), delays, weights, 0.4, 0.8, slot_p, slot_m)
    assert np.all(below > 1 - qs)


def test_merged_points_by_hand() -> None:
    """Equal (delay, p2, mean2) points become one of their summed weight; a point of no weight goes,
    but a NaN delay stays, apart from every other."""
    delays = np.array([[2.0, 1.0, 2.0], [1.0, math.nan, 3.0]])
    weights = np.array([[0.1, 0.2, 0.3], [0.15, 0.0, 0.0]])
    p2 = np.array([0.5, 0.5, 0.5])  # broadcast over the rows, as a per-output wait is
    mean2 = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    d, w, q, m = merged_points(delays, weights, p2, mean2)
    np.testing.assert_array_equal(d[:2], [1.0, 2.0])
    np.testing.assert_allclose(w, [0.35, 0.4, 0.0], rtol=1e-15)
    assert math.isnan(d[2]) and len(d) == 3
    np.testing.assert_array_equal(q, [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(m, [1.0, 1.0, 1.0])
    # a different second wait keeps an equal delay apart
    d, w, _, m = merged_points(np.array([1.0, 1.0]), np.array([0.5, 0.5]), np.array([0.1, 0.1]), np.array([1.0, 2.0]))
    assert len(d) == 2 and sorted(m) == [1.0, 2.0]
    empty = merged_points(np.array([1.0]), np.array([0.0]), np.array([0.0]), np.array([0.0]))
    assert all(len(part) == 0 for part in empty)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_merging_equal_points_keeps_the_mixture_and_its_quantiles(seed: int) -> None:
    """The survival over merged points is the survival over the points (rel 1e-12: the merged sum
    differs in its last bits only), and the quantiles found over them meet the unmerged tails."""
    rng = np.random.default_rng(seed)
    n = 60
    delays = rng.choice([0.5, 1.0, 2.5, 7.0], n)  # few distinct values, as a TTFT mixture has
    slot_p = rng.choice([0.0, 0.2], n)
    slot_m = rng.choice([0.0, 1.5], n)
    weights = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0.1, 1.0, n))
    weights /= weights.sum()
    d, w, q, m = merged_points(delays, weights, slot_p, slot_m)
    assert len(d) < n and w.sum() == pytest.approx(1.0, rel=1e-12)
    t = np.linspace(0.0, 15.0, 31)
    np.testing.assert_allclose(
        mixture_survival(t, d, w, 0.4, 0.8, q, m),
        mixture_survival(t, delays, weights, 0.4, 0.8, slot_p, slot_m),
        rtol=1e-12,
        atol=1e-15,
    )
    quantiles = mixture_quantiles([0.5, 0.9, 0.99], delays, weights, 0.4, 0.8, slot_p, slot_m)
    at = mixture_survival(quantiles, delays, weights, 0.4, 0.8, slot_p, slot_m)
    assert np.all(at <= 1 - np.array([0.5, 0.9, 0.99]) + 1e-9)


def _erlang_c_by_recursion(c: int, a: float) -> float:
    """Erlang B by its recursion B_k = a B_{k-1} / (k + a B_{k-1}), then C = c B / (c - a (1 - B))."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


@pytest.mark.parametrize(("c", "a"), [(36_544, 15_000.0), (20_000, 19_800.0), (4_096, 10.0), (3, 2.5)])
def test_erlang_c_of_large_pools_matches_the_recursion(c: int, a: float) -> None:
    """Pools of thousands of servers sum only the terms near the peak: the same value as the exact
    recursion over every k, also beside a small pool in the same call (windows of every width)."""
    both = erlang_c(np.array([c, 2.0]), np.array([a, 1.0]))
    assert both[0] == pytest.approx(_erlang_c_by_recursion(c, a), rel=1e-9, abs=1e-300)
    assert both[1] == pytest.approx(_erlang_c_by_recursion(2, 1.0), rel=1e-12)
