"""Network models: TCP bounds, RDMA copies, closed-form WAN transfer time, capacity fluctuation,
capacity traces and pooled WAN lines (pddplan.net).

Every expected number is computed by hand from the formulas in the module docstrings.
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from pddplan.errors import InputError
from pddplan.inputs.input_set import load_trace
from pddplan.net.fluctuation import CapacityPath, mean_fraction, read_trace, stationary_support
from pddplan.net.lines import HOURS_PER_MONTH, pool_lines
from pddplan.net.tcp import (
    RDMA_COPY_OVERHEAD_S,
    flow_cap_bytes_per_s,
    mathis_bytes_per_s,
    rdma_time_s,
    window_bytes_per_s,
)
from pddplan.net.transfer import SPARE_FLOOR, wan_transfer_time
from pddplan.specs.workload import Fluctuation, TcpSpec, WanLineOption

# -- TCP -----------------------------------------------------------------------------------------


def test_mathis_bound_by_hand() -> None:
    mss, rtt, p = 1460, 0.030, 1e-5
    expected = (mss / rtt) * math.sqrt(3 / 2) / math.sqrt(p)  # ~18.85 MB/s
    assert mathis_bytes_per_s(mss, rtt, p) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(18.85e6, rel=1e-3)
    # halving the RTT doubles it, quartering the loss doubles it
    assert mathis_bytes_per_s(mss, rtt / 2, p) == pytest.approx(2 * expected)
    assert mathis_bytes_per_s(mss, rtt, p / 4) == pytest.approx(2 * expected)
    assert math.isinf(mathis_bytes_per_s(mss, rtt, 0.0))


def test_window_bound_by_hand() -> None:
    assert window_bytes_per_s(64 * 2**20, 0.030) == pytest.approx(64 * 2**20 / 0.030)
    assert window_bytes_per_s(1e6, 0.1) == pytest.approx(1e7)


def test_flow_cap_cubic_is_loss_limited_on_a_lossy_long_line() -> None:
    tcp = TcpSpec(streams=8, congestion="cubic")
    line = 100e9 / 8
    cap = flow_cap_bytes_per_s(tcp, 0.030, 1e-5, line)
    per_stream = min(64 * 2**20 / 0.030, 1460 / 0.030 * math.sqrt(1.5) / math.sqrt(1e-5))
    assert per_stream < 64 * 2**20 / 0.030  # Mathis binds, not the window
    assert cap == pytest.approx(8 * per_stream, rel=1e-12)  # ~151 MB/s, ~1.2 Gbps for the transfer


def test_flow_cap_cubic_without_loss_is_window_limited() -> None:
    tcp = TcpSpec(streams=4, window_bytes=8e6, congestion="cubic")
    assert flow_cap_bytes_per_s(tcp, 0.05, 0.0, 1e12) == pytest.approx(4 * 8e6 / 0.05)


def test_flow_cap_bbr_ignores_random_loss() -> None:
    """BBR: min(window, C (1 - p)) per stream; random loss does not cut it to the Mathis rate."""
    line = 10e9 / 8
    bbr = TcpSpec(streams=2, window_bytes=16 * 2**20, congestion="bbr")
    cubic = bbr.model_copy(update={"congestion": "cubic"})
    rtt, p = 0.030, 1e-3
    expected_bbr = min(2 * min(16 * 2**20 / rtt, line * (1 - p)), line)
    expected_cubic = min(2 * min(16 * 2**20 / rtt, 1460 / rtt * math.sqrt(1.5) / math.sqrt(p)), line)
    assert flow_cap_bytes_per_s(bbr, rtt, p, line) == pytest.approx(expected_bbr, rel=1e-12)
    assert flow_cap_bytes_per_s(cubic, rtt, p, line) == pytest.approx(expected_cubic, rel=1e-12)
    assert flow_cap_bytes_per_s(bbr, rtt, p, line) > 10 * flow_cap_bytes_per_s(cubic, rtt, p, line)


def test_flow_cap_never_exceeds_the_line() -> None:
    tcp = TcpSpec(streams=64, window_bytes=1e9, congestion="bbr")
    assert flow_cap_bytes_per_s(tcp, 0.001, 0.0, 1.25e9) == pytest.approx(1.25e9)
    tcp_cubic = tcp.model_copy(update={"congestion": "cubic"})
    assert flow_cap_bytes_per_s(tcp_cubic, 0.001, 0.0, 1.25e9) == pytest.approx(1.25e9)


def test_rdma_time_by_hand() -> None:
    nic = 400e9 / 8  # 400 Gbps per GPU
    payload = np.array([0.0, 3.1e9, 1e8])
    out = rdma_time_s(payload, 16, nic)
    np.testing.assert_allclose(out, payload / (16 * nic) + 0.0245, rtol=1e-12)
    assert pytest.approx(0.0245) == RDMA_COPY_OVERHEAD_S  # the article's 24.5 ms GPU memory copy
    assert float(rdma_time_s(1e9, 8, nic)) == pytest.approx(2 * float(rdma_time_s(1e9, 16, nic)) - 0.0245)


# -- closed-form WAN transfer ----------------------------------------------------------------------


def test_wan_transfer_time_by_hand() -> None:
    """T(x, f) = RTT/2 + x / min(F, max(C f - L, 0.05 C f))."""
    sizes = np.array([1e6, 2.5e8, 4e9])
    capacity = np.array([12.5e9, 6e9, 1e9])  # available capacity C f at three fluctuation points
    offered = 2e9
    flow_cap = 5e9
    rtt = 0.030
    out = wan_transfer_time(sizes, capacity, offered, flow_cap, rtt)
    assert out.shape == (3, 3)
    for i, x in enumerate(sizes):
        for j, c in enumerate(capacity):
            rate = min(flow_cap, max(c - offered, SPARE_FLOOR * c))
            assert out[i, j] == pytest.approx(rtt / 2 + x / rate, rel=1e-12)
    # the 1 GB/s point is saturated by 2 GB/s of load: the spare floor (5% of C f) keeps it finite
    assert out[2, 2] == pytest.approx(rtt / 2 + 4e9 / (0.05 * 1e9))
    # on the idle 12.5 GB/s point the TCP cap binds
    assert out[1, 0] == pytest.approx(rtt / 2 + 2.5e8 / flow_cap)


def test_wan_transfer_time_broadcasts_offered_load() -> None:
    sizes = np.array([1e8, 1e9])
    capacity = np.array([1e9, 2e9])
    offered = np.array([[0.0], [5e8]])  # one load per pool size
    out = wan_transfer_time(sizes, capacity, offered, math.inf, 0.02)
    assert out.shape == (2, 2, 2)
    assert out[0, 1, 0] == pytest.approx(0.01 + 1e9 / 1e9)
    assert out[1, 1, 0] == pytest.approx(0.01 + 1e9 / 5e8)
    assert out[1, 0, 1] == pytest.approx(0.01 + 1e8 / 1.5e9)


def test_wan_transfer_time_is_monotone() -> None:
    sizes = np.linspace(1e6, 1e9, 20)
    low = wan_transfer_time(sizes, np.array([1e9]), 3e8, 2e8, 0.03)[:, 0]
    high = wan_transfer_time(sizes, np.array([2e9]), 3e8, 2e8, 0.03)[:, 0]
    assert np.all(np.diff(low) > 0)  # bigger payload, longer
    assert np.all(high <= low)  # more capacity, never longer
    loaded = wan_transfer_time(sizes, np.array([1e9]), 9e8, 2e8, 0.03)[:, 0]
    assert np.all(loaded >= low)  # more load, never shorter


# -- stationary fluctuation --------------------------------------------------------------------------


def test_stationary_support_without_fluctuation_is_one_point_at_one() -> None:
    for spec in (Fluctuation(kind="none"), Fluctuation(kind="ou", cv=0.0)):
        fractions, probs = stationary_support(spec)
        np.testing.assert_array_equal(fractions, [1.0])
        np.testing.assert_array_equal(probs, [1.0])
        assert mean_fraction(spec) == 1.0


@pytest.mark.parametrize("cv", [0.1, 0.3, 0.8])
def test_stationary_support_of_ou_fluctuation(cv: float) -> None:
    spec = Fluctuation(kind="ou", cv=cv, min_fraction=0.05)
    fractions, probs = stationary_support(spec)
    assert probs.sum() == pytest.approx(1.0)
    assert np.all((fractions >= 0.05) & (fractions <= 1.0))
    assert np.all(np.diff(fractions) >= 0)
    mean = mean_fraction(spec)
    assert mean < 1.0  # a clipped symmetric fluctuation only ever removes capacity

    # E[clip(1 + cv Z, min, 1)] by numerical integration; the quantile-point support approximates it
    def integrand(z: float) -> float:
        return min(max(1 + cv * z, 0.05), 1.0) * stats.norm.pdf(z)

    exact = integrate.quad(integrand, -12, 12, points=[0.0, (0.05 - 1) / cv])[0]
    assert mean == pytest.approx(exact, abs=0.015)


def test_more_fluctuation_lowers_the_mean() -> None:
    means = [mean_fraction(Fluctuation(kind="ou", cv=cv)) for cv in (0.0, 0.1, 0.3, 0.6, 1.0)]
    assert all(a > b for a, b in pairwise(means))


# -- capacity traces ---------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_read_trace_good_file(tmp_path: Path) -> None:
    path = write(tmp_path / "trace.csv", "time_s,capacity_fraction\n0,1.0\n1,0.5\n3,0.8\n")
    times, fractions = read_trace(path)
    np.testing.assert_array_equal(times, [0.0, 1.0, 3.0])
    np.testing.assert_array_equal(fractions, [1.0, 0.5, 0.8])


def test_trace_stationary_support_weights_by_duration(tmp_path: Path) -> None:
    """Durations 1, 2 and (for the last point) the mean spacing 1.5: weights 1/4.5, 2/4.5, 1.5/4.5."""
    write(tmp_path / "trace.csv", "time_s,capacity_fraction\n0,1.0\n1,0.5\n3,0.8\n")
    spec = Fluctuation(kind="trace", trace_file="trace.csv")
    fractions, probs = stationary_support(spec, load_trace(spec, tmp_path))
    np.testing.assert_allclose(fractions, [1.0, 0.5, 0.8])
    np.testing.assert_allclose(probs, [1 / 4.5, 2 / 4.5, 1.5 / 4.5])
    assert mean_fraction(spec, load_trace(spec, tmp_path)) == pytest.approx((1.0 * 1 + 0.5 * 2 + 0.8 * 1.5) / 4.5)


def test_trace_path_absolute_and_relative(tmp_path: Path) -> None:
    path = write(tmp_path / "abs.csv", "time_s,capacity_fraction\n0,0.5\n10,0.5\n")
    absolute = Fluctuation(kind="trace", trace_file=str(path))
    assert mean_fraction(absolute, load_trace(absolute)) == pytest.approx(0.5)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "rel.csv", "time_s,capacity_fraction\n0,0.25\n4,0.25\n")
    relative = Fluctuation(kind="trace", trace_file="sub/rel.csv")
    assert mean_fraction(relative, load_trace(relative, tmp_path)) == pytest.approx(0.25)


def test_single_row_trace_is_constant_or_rejected(tmp_path: Path) -> None:
    """read_trace accepts a one-row trace; repeated, one measurement is a constant fraction.

    Rejecting it with a one-line InputError would also be correct; a NaN mean (0 / 0 over its
    durations) or a NaN path (time modulo a zero period) is not.
    """
    write(tmp_path / "one.csv", "time_s,capacity_fraction\n0,0.25\n")
    spec = Fluctuation(kind="trace", trace_file="one.csv")
    try:
        fractions, probs = stationary_support(spec, load_trace(spec, tmp_path))
    except InputError as exc:
        assert "one.csv" in str(exc)
        return
    assert float(fractions @ probs) == pytest.approx(0.25)
    path = CapacityPath(spec, np.random.default_rng(0), load_trace(spec, tmp_path))
    fraction, following = path.next_step(7.0)
    assert fraction == pytest.approx(0.25)
    assert following > 7.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time_s,capacity_fraction\n0,1.0\n2,0.5\n2,0.7\n", "line 4: time_s = 2.0: times must increase"),
        ("time_s,capacity_fraction\n0,1.0\n5,0.5\n3,0.7\n", "times must increase"),
        ("time_s,capacity_fraction\n0,1.0\n1,1.5\n", "line 3: capacity_fraction = 1.5: expected 0 < f <= 1"),
        ("time_s,capacity_fraction\n0,0\n", "capacity_fraction = 0.0: expected 0 < f <= 1"),
        ("time_s,capacity_fraction\n0,-0.2\n", "expected 0 < f <= 1"),
        ("time_s,fraction\n0,1.0\n", "expected CSV columns time_s,capacity_fraction"),
        ("capacity_fraction\n1.0\n", "expected CSV columns time_s,capacity_fraction"),
        ("", "expected CSV columns time_s,capacity_fraction"),
        ("time_s,capacity_fraction\n", "expected CSV columns time_s,capacity_fraction"),
        ("time_s,capacity_fraction\n0,high\n", "line 2: not a number"),
    ],
)
def test_read_trace_rejects_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(InputError) as info:
        read_trace(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_read_trace_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="capacity trace file not found"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="capacity trace file not found"):
        stationary_support(
            Fluctuation(kind="trace", trace_file="nope.csv"),
            load_trace(Fluctuation(kind="trace", trace_file="nope.csv"), tmp_path),
        )


def test_trace_capacity_path_steps_and_repeats(tmp_path: Path) -> None:
    """Trace 0->1.0, 1->0.5, 3->0.8 with period 4.5 s (last point held for the mean spacing)."""
    write(tmp_path / "trace.csv", "time_s,capacity_fraction\n0,1.0\n1,0.5\n3,0.8\n")
    path = CapacityPath(
        Fluctuation(kind="trace", trace_file="trace.csv"),
        np.random.default_rng(0),
        load_trace(Fluctuation(kind="trace", trace_file="trace.csv"), tmp_path),
    )
    assert not path.constant
    assert path.next_step(0.0) == pytest.approx((1.0, 1.0))
    assert path.next_step(1.5) == pytest.approx((0.5, 3.0))
    assert path.next_step(3.2) == pytest.approx((0.8, 4.5))
    assert path.next_step(5.0) == pytest.approx((1.0, 5.5))  # second period: local time 0.5
    assert path.next_step(10.0) == pytest.approx((0.5, 12.0))  # third period: local time 1.0


def test_trace_path_always_moves_forward(tmp_path: Path) -> None:
    """Walking a trace path from each of its own change times must always advance. With knots at
    0.7 and 2.2 s the period (2.2 + 2.2/3 s) is not a binary fraction; at t = 8.0666... (the
    third period's 2.2 s knot) `(t - t0) % period` lands a rounding error below 2.2, so the next
    change comes out as t itself and a simulated link waiting for it never moves again."""
    write(tmp_path / "t.csv", "time_s,capacity_fraction\n0,1.0\n0.7,0.2\n1.5,0.6\n2.2,0.35\n")
    path = CapacityPath(
        Fluctuation(kind="trace", trace_file="t.csv"),
        np.random.default_rng(0),
        load_trace(Fluctuation(kind="trace", trace_file="t.csv"), tmp_path),
    )
    t, steps = 0.0, 0
    while t < 300.0:
        fraction, following = path.next_step(t)
        assert following > t, f"stuck at t = {t!r} after {steps} steps"
        assert fraction in (1.0, 0.2, 0.6, 0.35)
        t, steps = following, steps + 1
    assert steps == pytest.approx(4 * 300 / (2.2 + 2.2 / 3), abs=4)


def test_constant_capacity_path() -> None:
    for spec in (Fluctuation(kind="none"), Fluctuation(kind="ou", cv=0.0)):
        path = CapacityPath(spec, np.random.default_rng(1))
        assert path.constant
        assert path.next_step(12.3) == (1.0, math.inf)


def test_ou_capacity_path_matches_its_stationary_distribution() -> None:
    """A long OU path (correlation = one step) averages to the stationary mean within 0.01."""
    spec = Fluctuation(kind="ou", cv=0.3, correlation_s=1.0, step_s=1.0, min_fraction=0.05)
    path = CapacityPath(spec, np.random.default_rng(11))
    t = 0.0
    values = []
    for _ in range(20_000):
        fraction, following = path.next_step(t)
        assert following == pytest.approx(t + 1.0)
        values.append(fraction)
        t = following
    values_arr = np.array(values)
    assert values_arr.min() >= 0.05
    assert values_arr.max() <= 1.0
    exact = 1 - 0.3 / math.sqrt(2 * math.pi)  # E[min(1 + cv Z, 1)]; the 0.05 floor is 3 sd away
    assert values_arr.mean() == pytest.approx(exact, abs=0.01)
    assert values_arr.mean() == pytest.approx(mean_fraction(spec), abs=0.015)
    # the path is a path, not white noise: neighbouring steps are correlated (a = e^-1 = 0.37)
    centered = values_arr - values_arr.mean()
    lag1 = float(centered[:-1] @ centered[1:] / (centered @ centered))
    assert 0.2 < lag1 < 0.5


def test_ou_capacity_path_is_reproducible() -> None:
    spec = Fluctuation(kind="ou", cv=0.5, correlation_s=5.0, step_s=0.5)
    a = CapacityPath(spec, np.random.default_rng(5))
    b = CapacityPath(spec, np.random.default_rng(5))
    for t in np.arange(0.0, 50.0, 0.5):
        assert a.next_step(float(t)) == b.next_step(float(t))


# -- pooled WAN lines --------------------------------------------------------------------------------


def option(name: str, gbps: float, rtt_ms: float, usd: float, **extra: object) -> WanLineOption:
    return WanLineOption.model_validate(
        {
            "name": name,
            "between": ["dc-a", "dc-b"],
            "capacity_gbps": gbps,
            "rtt_ms": rtt_ms,
            "usd_per_month": usd,
            "price_source": "assumption: test",
            **extra,
        }
    )


def test_pool_lines_adds_capacity_and_cost() -> None:
    big = option("big", 100, 30, 5200, loss_rate=1e-5)
    small = option("small", 40, 25, 2450, loss_rate=0.0, tcp={"streams": 2, "window_bytes": 1e6})
    pool = pool_lines("dc-a", "dc-b", [(big, 1), (small, 2)])
    assert pool.capacity_bytes_per_s == pytest.approx((100 + 2 * 40) * 1e9 / 8)
    assert pool.gbps == pytest.approx(180)
    assert pool.lines == 3
    assert pool.usd_per_hour == pytest.approx((5200 + 2 * 2450) / HOURS_PER_MONTH)
    assert HOURS_PER_MONTH == 730
    # the option with the largest leased capacity (100 > 2 x 40) sets RTT, flow cap and fluctuation
    assert pool.rtt_s == pytest.approx(0.030)
    assert pool.flow_cap_bytes_per_s == pytest.approx(flow_cap_bytes_per_s(big.tcp, 0.030, 1e-5, 100e9 / 8))
    assert pool.key == "dc-a->dc-b:1xbig+2xsmall"
    assert (pool.source, pool.target) == ("dc-a", "dc-b")


def test_pool_lines_main_option_is_by_leased_capacity() -> None:
    big = option("big", 100, 30, 5200)
    small = option("small", 40, 12, 2450, tcp={"streams": 2, "window_bytes": 1e6})
    pool = pool_lines("dc-a", "dc-b", [(big, 1), (small, 3)])  # 3 x 40 = 120 > 100
    assert pool.rtt_s == pytest.approx(0.012)
    assert pool.flow_cap_bytes_per_s == pytest.approx(min(2 * 1e6 / 0.012, 40e9 / 8))


def test_pool_capacity_support_scales_the_fluctuation(tmp_path: Path) -> None:
    write(tmp_path / "trace.csv", "time_s,capacity_fraction\n0,1.0\n1,0.5\n")
    line = option("t", 10, 20, 720, fluctuation={"kind": "trace", "trace_file": "trace.csv"})
    trace = load_trace(line.fluctuation, tmp_path)
    assert trace is not None
    pool = pool_lines("dc-a", "dc-b", [(line, 2)], {str(line.fluctuation.trace_file): trace})
    capacity, probs = pool.capacity_support()
    np.testing.assert_allclose(capacity, [2.5e9, 1.25e9])
    np.testing.assert_allclose(probs, [0.5, 0.5])
    assert pool.mean_capacity_bytes_per_s() == pytest.approx(2.5e9 * 0.75)
    steady = pool_lines("dc-a", "dc-b", [(option("s", 10, 20, 720), 1)])
    assert steady.mean_capacity_bytes_per_s() == pytest.approx(1.25e9)
