"""Invariants of the simulator, as hypothesis properties over small random deployments.

- More WAN capacity never delays any transfer (the processor-sharing link alone, and every
  request's KV landing time in whole pd-cross / pdd simulations).
- Adding a main-decode instance never raises TTFT (on the distribution; see the test for why not
  per request).
- Every output token is produced exactly once, by the relay or by the main decoder.
- The same seed gives the same simulation.

Request counts stay small (<= 150) and rates >= 0.5 req/s, so each example simulates a few hundred
seconds and runs in milliseconds.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_simulation import deadline  # turns a hang into a failure
from toys import PLANS
from toys import plan_data as plan

import pddplan.simulate.engine as engine
from pddplan.inputs.input_set import load_input_set, load_trace
from pddplan.net.fluctuation import CapacityPath
from pddplan.perf import decode_step_time
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.engine import _distinct_pairs, interpolate, simulate_requests
from pddplan.simulate.servers import DecodeInstance, Link
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Fluctuation, Workload
from pddplan.support.loading import validate

BASE_WORKLOAD: dict[str, Any] = yaml.safe_load((PLANS / "small-workload.yaml").read_text(encoding="utf-8"))

PROPERTY = settings(max_examples=50, deadline=None)


def workload(output_median: float, low_hit_share: float, rtt_ms: float = 20.0) -> Workload:
    data = copy.deepcopy(BASE_WORKLOAD)
    data["output_tokens"] = {
        "kind": "lognormal",
        "median_tokens": output_median,
        "sigma": 0.8,
        "min_tokens": 2,
        "max_tokens": 1000,
    }
    data["hit_rate"] = {
        "buckets": [
            {"low": 0.0, "high": 0.5, "share": low_hit_share},
            {"low": 0.9, "high": 1.0, "share": 1.0 - low_hit_share},
        ]
    }
    for line in data["deployment"]["wan_lines"]:
        line["rtt_ms"] = rtt_ms
    return validate(Workload, data, "workload.yaml")


def scenario(plan_data: dict[str, Any], w: Workload) -> Scenario:
    return build_scenario(validate(Plan, plan_data, "plan.yaml"), load_input_set(w, PLANS))


# -- more capacity never delays a transfer -----------------------------------------------------------


def run_link(link: Link, arrivals: list[float], sizes: list[float]) -> dict[int, float]:
    done: dict[int, float] = {}

    def drain(until: float) -> None:
        while True:
            t = link.next_event()
            if t == math.inf or t > until:
                return
            link.pop_finished(t, done.__setitem__)

    for i in sorted(range(len(arrivals)), key=lambda k: arrivals[k]):
        drain(arrivals[i])
        link.start(i, sizes[i], arrivals[i])
    drain(math.inf)
    return done


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trace")
    # knots at binary fractions: see test_net.py::test_trace_path_always_moves_forward for traces
    # whose period rounding stalls the path (a separate bug, kept out of this property)
    (folder / "t.csv").write_text("time_s,capacity_fraction\n0,1.0\n0.75,0.2\n1.5,0.6\n2.25,0.35\n", encoding="utf-8")
    return folder


@PROPERTY
@given(
    flows=st.lists(st.tuples(st.floats(0, 10), st.floats(0.01, 10)), min_size=1, max_size=25),
    capacity=st.floats(0.1, 5),
    factor=st.floats(1.0, 4.0),
    flow_cap=st.one_of(st.just(math.inf), st.floats(0.05, 10)),
    traced=st.booleans(),
)
def test_link_more_capacity_never_delays_a_flow(
    trace_dir: Path, flows: list[tuple[float, float]], capacity: float, factor: float, flow_cap: float, traced: bool
) -> None:
    """Egalitarian processor sharing with a per-flow cap: each flow's rate is min(F, C f(t) / n(t)).
    Scaling C up (same arrivals, sizes and capacity trace f) never makes any flow finish later:
    a flow that finishes earlier only lowers n(t) for the others."""
    spec = Fluctuation(kind="trace", trace_file="t.csv") if traced else Fluctuation(kind="none")
    arrivals = [a for a, _ in flows]
    sizes = [x for _, x in flows]

    def completion(c: float) -> dict[int, float]:
        path = CapacityPath(spec, np.random.default_rng(0), load_trace(spec, trace_dir))
        with deadline(10):
            return run_link(Link(c, flow_cap, path), arrivals, sizes)

    slow, fast = completion(capacity), completion(capacity * factor)
    assert set(slow) == set(fast) == set(range(len(flows)))
    for i, t in slow.items():
        assert fast[i] <= t + 1e-6 * (1 + t)
        assert fast[i] >= arrivals[i] + sizes[i] / min(flow_cap, capacity * factor) - 1e-6 * (1 + t)


def link_completions(s: Scenario, requests: int, seed: int) -> tuple[engine.RequestTable, dict[int, float]]:
    """Simulate with a Link that records when each request's transfer completes."""
    done: dict[int, float] = {}

    class RecordingLink(Link):
        def pop_finished(self, t: float, on_done: Any) -> None:
            def record(request: int, when: float) -> None:
                done[request] = when
                on_done(request, when)

            super().pop_finished(t, record)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "Link", RecordingLink)
        with deadline(10):
            table, _ = simulate_requests(s, requests, seed)
    return table, done


@PROPERTY
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(0.5, 6.0),
    lines=st.integers(1, 4),
    more=st.integers(1, 4),
    option=st.sampled_from(["line-1g", "line-trace"]),
    architecture=st.sampled_from(["small-pd-cross", "small-pdd"]),
    output_median=st.floats(20, 300),
    low_hit_share=st.floats(0.05, 0.6),
)
def test_more_line_capacity_never_delays_any_transfer(
    seed: int,
    rate: float,
    lines: int,
    more: int,
    option: str,
    architecture: str,
    output_median: float,
    low_hit_share: float,
) -> None:
    """Per request, the time its KV transfer completes is non-increasing in the number of lines.

    Why this quantity: a transfer starts when its prefill ends, which does not depend on the WAN
    (prefill is FIFO on arrival order and service times fixed by the seed); every transfer runs to
    the end (pd-cross, or pdd with singular filtering off, so no cancellation that depends on the
    relay's progress, itself a function of the WAN); lines of one option add capacity and keep the
    per-flow TCP cap and the (deterministic) trace; and processor sharing is monotone in capacity.
    TTFT itself is not per-request monotone: an earlier KV changes the decoders' batches and the
    least-loaded routing of everyone else.
    """
    w = workload(output_median, low_hit_share)
    changes: dict[str, Any] = {"rate_rps": rate}
    if architecture == "small-pdd":
        changes["routing"] = {"singular_filter": False}
    results = []
    for count in (lines, lines + more):
        s = scenario(plan(architecture, wan=[{"option": option, "count": count}], **changes), w)
        results.append(link_completions(s, 120, seed))
    (table_few, few), (table_many, many) = results
    np.testing.assert_array_equal(table_few.prefill_end_s, table_many.prefill_end_s)
    assert set(few) == set(many) == set(range(120))
    for request, t in few.items():
        assert many[request] <= t + 1e-9 * (1 + t), (request, t, many[request])


# -- more main decoders never raise TTFT --------------------------------------------------------------


@PROPERTY
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(0.5, 12.0),
    count=st.integers(1, 3),
    max_batch=st.integers(1, 16),
    architecture=st.sampled_from(["small-pd-intra", "small-pd-cross"]),
    output_median=st.floats(20, 300),
    requests=st.integers(40, 150),
)
def test_another_decode_instance_never_raises_ttft(
    seed: int, rate: float, count: int, max_batch: int, architecture: str, output_median: float, requests: int
) -> None:
    """Same seed, decode.count n and n + 1 (pd-intra, or pd-cross on ample lines): the mean TTFT
    does not rise by more than the spread of the decode step time tau(max batch) - tau(1).

    Not per request: least-loaded routing balances instances at join times only, so with n + 1
    instances a request can meet a fuller instance than with n (departures leave n imbalanced),
    and then its first decode step takes longer (up to that spread), or it waits for a slot behind
    a differently ordered queue. Across the distribution, the extra instance only adds slots and
    removes batch, so the mean stays at or below its value with n instances, to one step-time
    spread (which bounds the per-request effect when no one waits for a slot). The sample P90 is not
    held to this: with slot waits, a reordered queue moves single requests, and the P90 of a few
    dozen requests is a single request (seed 40, 1.5 req/s, 2 -> 3 instances of one slot, 40
    requests: P90 +1.3 ms while the mean falls 15 ms).
    """
    w = workload(output_median, 0.3)
    ttft = []
    spread = 0.0
    for n in (count, count + 1):
        p = plan(architecture, rate_rps=rate, max_decode_batch=max_batch)
        p["decode"]["count"] = n
        if architecture == "small-pd-cross":
            p["wan"] = [{"option": "line-1g", "count": 8}]
        s = scenario(p, w)
        table, _ = simulate_requests(s, requests, seed)
        ttft.append(table.ttft_s)
        context = float(np.mean(table.prompt_tokens) + np.mean(table.output_tokens) / 2)
        steps = decode_step_time(s.decode.instance, np.array([1.0, float(max_batch)]), context)
        spread = max(spread, float(steps[1] - steps[0]))
    few, many = ttft
    assert many.mean() <= few.mean() + spread + 1e-9


# -- every output token is produced exactly once ----------------------------------------------------------


def token_ledger(s: Scenario, requests: int, seed: int) -> tuple[engine.RequestTable, dict[str, dict[int, float]]]:
    """Simulate, recording the tokens each request is admitted with on the relay and on the MD."""
    ledger: dict[str, dict[int, float]] = {"relay": defaultdict(float), "decode": defaultdict(float)}
    admitted_relay: dict[int, int] = defaultdict(int)
    original_pool = engine._decode_pool

    class Recording(DecodeInstance):
        pool = "decode"

        def admit(self, request: int, tokens: float, t: float, stall_s: float) -> float:
            ledger[self.pool][request] += tokens
            if self.pool == "relay":
                admitted_relay[request] += 1
            return super().admit(request, tokens, t, stall_s)

    def tagged_pool(scenario: Scenario, role: Any, context: float, reserved: float) -> list[DecodeInstance]:
        pool = original_pool(scenario, role, context, reserved)
        for inst in pool:
            inst.pool = role.name  # type: ignore[attr-defined]
        return pool

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "DecodeInstance", Recording)
        patch.setattr(engine, "_decode_pool", tagged_pool)
        with deadline(10):
            table, _ = simulate_requests(s, requests, seed)
    assert all(n == 1 for n in admitted_relay.values())  # a request sits on the relay once at most
    return table, ledger


@PROPERTY
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(0.5, 8.0),
    mode=st.sampled_from(["one-shot", "catch-up", "adaptive"]),
    threshold=st.integers(4, 128),
    singular_filter=st.booleans(),
    hit_threshold=st.floats(0.0, 1.0),
    output_median=st.floats(10, 400),
    low_hit_share=st.floats(0.05, 0.9),
    rtt_ms=st.floats(5, 200),
    relays=st.integers(1, 2),
)
def test_every_output_token_is_produced_exactly_once(
    seed: int,
    rate: float,
    mode: str,
    threshold: int,
    singular_filter: bool,
    hit_threshold: float,
    output_median: float,
    low_hit_share: float,
    rtt_ms: float,
    relays: int,
) -> None:
    """Per request: relay tokens + main-decoder tokens = output tokens.

    The relay is admitted with the whole output but produces only `relay_tokens` of it (it stops
    at the handoff); the main decoder is then admitted with output - relay_tokens. A P-RLD
    (singular) request is finished by the relay alone and never reaches the MD; a P-MD request
    never touches the relay; every request has a first token and a finish time.
    """
    w = workload(output_median, low_hit_share, rtt_ms)
    p = plan(
        "small-pdd",
        rate_rps=rate,
        handoff={"mode": mode, "catchup_threshold_tokens": threshold},
        routing={"kind": "hit", "hit_threshold": hit_threshold, "singular_filter": singular_filter},
    )
    p["relay"]["count"] = relays
    table, ledger = token_ledger(scenario(p, w), 100, seed)
    assert np.all(np.isfinite(table.first_token_s)) and np.all(np.isfinite(table.finish_s))
    assert np.all(table.finish_s >= table.first_token_s)
    output = table.output_tokens.astype(float)
    assert np.all(table.relay_tokens <= output + 1e-6)
    for request in range(len(output)):
        pipeline = str(table.pipeline[request])
        on_md = ledger["decode"].get(request, 0.0)
        if pipeline == "P-RLD":
            assert table.relay_tokens[request] == pytest.approx(output[request])
            assert request not in ledger["decode"]
        elif pipeline == "P-MD":
            assert request not in ledger["relay"]
            assert table.relay_tokens[request] == 0
            assert on_md == pytest.approx(output[request])
        else:
            assert pipeline == "P-RLD-MD"
            assert table.hit[request] < hit_threshold
            assert table.relay_tokens[request] + on_md == pytest.approx(output[request], rel=1e-9, abs=1e-6)


# -- determinism -------------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    architecture=st.sampled_from(["small-pd-intra", "small-pd-cross", "small-pdd"]),
    option=st.sampled_from(["line-1g", "line-trace"]),
)
def test_same_seed_same_simulation(seed: int, architecture: str, option: str) -> None:
    w = workload(100, 0.3)
    changes: dict[str, Any] = {} if architecture == "small-pd-intra" else {"wan": [{"option": option, "count": 4}]}
    s = scenario(plan(architecture, **changes), w)
    a, stats_a = simulate_requests(s, 80, seed)
    b, stats_b = simulate_requests(s, 80, seed)
    for field in ("arrival_s", "prompt_tokens", "hit", "output_tokens", "first_token_s", "finish_s", "relay_tokens"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.pipeline, b.pipeline)
    assert stats_a == stats_b
    c, _ = simulate_requests(s, 80, seed + 1)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    rate=st.floats(0.5, 6.0),
    architecture=st.sampled_from(["small-pd-cross", "small-pdd"]),
    option=st.sampled_from(["line-1g", "line-trace"]),
    rtt_ms=st.sampled_from([20.0, 200.0]),
    mode=st.sampled_from(["one-shot", "catch-up"]),
)
def test_the_link_run_ahead_is_the_event_loops_run(
    seed: int, rate: float, architecture: str, option: str, rtt_ms: float, mode: str
) -> None:
    """Where no decoder can stop a transfer (pd-cross; pdd with singular filtering off), the link's
    whole run done before the event loop gives every output of the run inside it, to the bit."""
    w = workload(100, 0.3, rtt_ms)
    changes: dict[str, Any] = {"rate_rps": rate, "wan": [{"option": option, "count": 2}]}
    if architecture == "small-pdd":
        changes |= {"routing": {"singular_filter": False}, "handoff": {"mode": mode}}
    s = scenario(plan(architecture, **changes), w)
    runs = []
    for ahead in (True, False):
        simulation = engine._Simulation(s, 80, np.random.default_rng(seed))
        if not ahead:
            simulation._link_runs_ahead = lambda: False  # type: ignore[method-assign]
        simulation.run()
        assert simulation.link_ran_ahead is ahead
        runs.append((simulation.table(), simulation.stats()))
    (a, stats_a), (b, stats_b) = runs
    for field in ("first_token_s", "finish_s", "worst_gap_s", "relay_tokens", "wan_bytes"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.pipeline, b.pipeline)
    assert stats_a == stats_b


@given(
    st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=2, max_size=40, unique=True),
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=40, max_size=40),
    st.floats(-10.0, 2e6, allow_nan=False),
)
def test_scalar_interpolation_is_numpys_to_the_bit(grid: list[float], values: list[float], x: float) -> None:
    """The simulator's one-value interpolation (a relay handoff's extend step) gives np.interp's
    float exactly, inside the grid, on its points and beyond either end."""
    xp = sorted(grid)
    fp = values[: len(xp)]
    for point in (x, xp[0], xp[-1], xp[len(xp) // 2]):
        assert interpolate(point, xp, fp) == float(np.interp(point, xp, fp))


@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 2**31 - 1).map(float), st.floats(-1e12, 1e12, allow_nan=False)),
            st.one_of(st.integers(0, 2**31 - 1).map(float), st.sampled_from([0.0, 64.0, 0.5])),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_distinct_token_pairs_are_numpys_row_unique(rows: list[tuple[float, float]]) -> None:
    """The packed-key unique of (new, cached) token pairs is np.unique(axis=0)'s: the same pairs in
    the same order and the same inverse, for whole token counts and for any other floats (which
    take the row-wise path)."""
    first, second = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    pairs, back = _distinct_pairs(first, second)
    expected, inverse = np.unique(np.stack([first, second], axis=1), axis=0, return_inverse=True)
    np.testing.assert_array_equal(pairs, expected)
    np.testing.assert_array_equal(back, inverse.reshape(-1))
