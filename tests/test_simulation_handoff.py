"""The simulated relay -> main-decoder handoff (pddplan.simulate.engine with pddplan.evaluate.handoff).

A request alone in the system, relayed (hit 0.1 < 0.9), 8,192-token prompt, 3,000-token output. The
relay starts after the RDMA copy and decodes k0 = (WAN transfer + RTT - RDMA) / tau_RLD eager tokens
until it hears that the main decoder (MD) has the KV. Catch-up then runs the rounds of
`catch_up_rounds`: chunk i's IDs land at the MD RTT/2 after they leave and stall that MD instance
for its extend e_i; the relay keeps decoding for sum_i (RTT + e_i) and sends the last chunk, whose
extend is the request's own hiccup:

    hiccup = RTT/2 + extend(last chunk) + tau_MD(batch 1)
    MD stall = sum of every chunk's extend (earlier chunks + the last one)

Expected values are computed here from the same formulas (roofline, handoff); the simulator reads
extend times from an interpolated table, hence rtol 1e-4.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from toys import PLANS
from toys import plan_data as plan

import pddplan.evaluate.analytic as analytic
import pddplan.simulate.engine as engine
from pddplan.evaluate import evaluate
from pddplan.evaluate.handoff import MAX_CATCHUP_ROUNDS, CatchUp, catch_up_chunks, catch_up_rounds
from pddplan.inputs import load_workload
from pddplan.inputs.input_set import load_input_set
from pddplan.perf.kv import incremental_kv_bytes, request_kv_bytes
from pddplan.perf.roofline import decode_step_time, extend_time
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate import simulate
from pddplan.simulate.engine import RequestTable, simulate_requests
from pddplan.simulate.servers import DecodeInstance
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support.loading import validate

BASE_WORKLOAD: dict[str, Any] = yaml.safe_load((PLANS / "small-workload.yaml").read_text(encoding="utf-8"))
ISOLATED = 2e-3  # requests ~500 s apart on average
CONTEXT = 8192 + 1500  # the decoders' mean context: prompt + output / 2


def relay_workload(rtt_ms: float, output_tokens: int = 3000) -> Workload:
    data = copy.deepcopy(BASE_WORKLOAD)
    data["deployment"]["wan_lines"][0]["rtt_ms"] = rtt_ms
    data.update(
        prompt_tokens={"kind": "fixed", "tokens": 8192},
        output_tokens={"kind": "fixed", "tokens": output_tokens},
        hit_rate={"buckets": [{"low": 0.1, "high": 0.1001, "share": 1.0}]},
    )
    return validate(Workload, data, "workload.yaml")


def scenario(w: Workload, **changes: Any) -> Scenario:
    return build_scenario(validate(Plan, plan("small-pdd", **changes), "plan.yaml"), load_input_set(w, PLANS))


def alone(table: RequestTable, margin_s: float = 100.0) -> np.ndarray:
    """Requests with no neighbour within `margin_s` (so they met nobody); at least five of them."""
    gaps = np.diff(table.arrival_s)
    mask = (np.concatenate([[np.inf], gaps]) > margin_s) & (np.concatenate([gaps, [np.inf]]) > margin_s)
    assert mask.sum() >= 5
    return mask


class ByHand:
    """The isolated request's handoff, from the formulas."""

    def __init__(self, s: Scenario, threshold_tokens: int) -> None:
        assert s.link is not None and s.relay is not None
        self.decode_instance = s.decode.instance
        rdma = float(request_kv_bytes(s.model, 8192, 64)) / s.prefill.instance.hardware.nic_bytes_per_s + 0.0245
        x = float(incremental_kv_bytes(s.model, 8192, 0.10005, 64))
        wan = x / min(s.link.flow_cap_bytes_per_s, s.link.capacity_bytes_per_s)
        self.rtt_s = s.link.rtt_s
        self.tau_relay = float(decode_step_time(s.relay.instance, 1.0, CONTEXT))
        self.tau_md = float(decode_step_time(s.decode.instance, 1.0, CONTEXT))
        self.first_chunk = (wan + self.rtt_s - rdma) / self.tau_relay
        self.earlier_chunks: list[float] = []  # tokens of each chunk before the last
        self.rounds: CatchUp = catch_up_rounds(
            np.array(self.first_chunk), self.tau_relay, self.rtt_s, threshold_tokens, self._extend_s, True
        )

    def _extend_s(self, tokens: np.ndarray) -> np.ndarray:
        (chunk,) = np.ravel(tokens)  # the one class, still catching up
        self.earlier_chunks.append(float(chunk))
        return self.extend_s(tokens)

    def extend_s(self, tokens: Any) -> np.ndarray:
        return extend_time(self.decode_instance, tokens, CONTEXT)

    @property
    def last_extend_s(self) -> float:
        return float(self.extend_s(float(self.rounds.last_chunk_tokens)))

    @property
    def hiccup_s(self) -> float:
        return self.rtt_s / 2 + self.last_extend_s + self.tau_md

    @property
    def relay_tokens(self) -> float:
        return self.first_chunk + float(self.rounds.extra_relay_s) / self.tau_relay


# rtt 20 ms: one catch-up round; 200 ms, threshold 64: one round, whose next chunk (~28 tokens) is the last;
# 200 ms, threshold 16: RTT / tau_RLD ~ 24 tokens > 16 every round, so all six rounds run
@pytest.mark.parametrize(("rtt_ms", "threshold", "rounds"), [(20, 16, 1), (200, 64, 1), (200, 16, 6)])
def test_isolated_catch_up_hiccup_is_the_last_chunks_extend(rtt_ms: float, threshold: int, rounds: int) -> None:
    """hiccup (worst_gap_s) = RTT/2 + extend(last chunk) + tau_MD; the relay decodes k0 plus
    sum_i (RTT + e_i) / tau_RLD tokens."""
    s = scenario(
        relay_workload(rtt_ms),
        rate_rps=ISOLATED,
        handoff={"mode": "catch-up", "catchup_threshold_tokens": threshold},
    )
    hand = ByHand(s, threshold)
    assert len(hand.earlier_chunks) == rounds
    table, _ = simulate_requests(s, 12, seed=0)
    one = alone(table)
    assert set(table.pipeline.tolist()) == {"P-RLD-MD"}
    np.testing.assert_allclose(table.worst_gap_s[one], hand.hiccup_s, rtol=1e-4)
    np.testing.assert_allclose(table.relay_tokens[one], hand.relay_tokens, rtol=1e-4)
    # the earlier chunks' extends are not in it (they ran while the relay streamed)
    assert np.all(table.worst_gap_s[one] < hand.hiccup_s + 0.5 * float(hand.rounds.earlier_extend_s))


def test_isolated_catch_up_hiccup_matches_the_closed_form() -> None:
    """The closed form charges the same hiccup: worst-gap P99 of a workload whose every request is
    relayed and handed over, alone, within 1%."""
    s = scenario(relay_workload(200), rate_rps=ISOLATED, handoff={"mode": "catch-up", "catchup_threshold_tokens": 16})
    table, _ = simulate_requests(s, 12, seed=0)
    one = alone(table)
    assert float(np.max(table.worst_gap_s[one])) == pytest.approx(evaluate(s).worst_gap_p99_s, rel=0.01)


def test_one_shot_hiccup_is_the_extend_of_every_eager_token() -> None:
    """One-shot: one chunk of k0 tokens; hiccup = RTT/2 + extend(k0) + tau_MD."""
    s = scenario(relay_workload(200), rate_rps=ISOLATED, handoff={"mode": "one-shot"})
    hand = ByHand(s, 16)
    table, _ = simulate_requests(s, 12, seed=0)
    one = alone(table)
    extend_k0 = float(hand.extend_s(hand.first_chunk))
    np.testing.assert_allclose(table.worst_gap_s[one], hand.rtt_s / 2 + extend_k0 + hand.tau_md, rtol=1e-4)
    np.testing.assert_allclose(table.relay_tokens[one], hand.first_chunk, rtol=1e-6)


class Recording(DecodeInstance):
    """A decode instance that records its stalls and admissions (with the pool it belongs to)."""

    stalls: ClassVar[list[tuple[int, float, float]]] = []  # (id of instance, t, seconds)
    admits: ClassVar[list[tuple[int, int, float, float]]] = []  # (id of instance, request, t, stall_s)

    def stall(self, t: float, seconds: float) -> None:
        Recording.stalls.append((id(self), t, seconds))
        super().stall(t, seconds)

    def admit(self, request: int, tokens: float, t: float, stall_s: float) -> float:
        Recording.admits.append((id(self), request, t, stall_s))
        return super().admit(request, tokens, t, stall_s)


@pytest.mark.parametrize("threshold", [16, 64])
def test_main_decoder_stalls_for_every_chunks_extend(monkeypatch: pytest.MonkeyPatch, threshold: int) -> None:
    """One request, catch-up over a 200 ms line: the main-decoder instance it lands on stalls for
    sum_i e_i (every chunk, the last included), once per chunk, each earlier chunk when its IDs
    land (RTT/2 after they leave) and all on the instance that admits the request at the end."""
    Recording.stalls, Recording.admits = [], []
    pools: dict[str, list[DecodeInstance]] = {}
    real_pool = engine._decode_pool

    def recorded_pool(s: Scenario, role: Any, context: float, reserved: float) -> list[DecodeInstance]:
        pools[role.name] = real_pool(s, role, context, reserved)
        return pools[role.name]

    monkeypatch.setattr(engine, "DecodeInstance", Recording)
    monkeypatch.setattr(engine, "_decode_pool", recorded_pool)
    s = scenario(
        relay_workload(200),
        rate_rps=ISOLATED,
        handoff={"mode": "catch-up", "catchup_threshold_tokens": threshold},
    )
    hand = ByHand(s, threshold)
    table, _ = simulate_requests(s, 1, seed=0)
    md_stall = float(hand.rounds.earlier_extend_s) + hand.last_extend_s
    assert sum(inst.stalled_s for inst in pools["decode"]) == pytest.approx(md_stall, rel=1e-4)
    assert sum(inst.stalled_s for inst in pools["relay"]) == 0.0
    md_ids = {id(inst) for inst in pools["decode"]}
    (final,) = [a for a in Recording.admits if a[0] in md_ids]
    stalls = [st for st in Recording.stalls if st[0] in md_ids]
    assert len(stalls) == len(hand.earlier_chunks) + 1
    assert {st[0] for st in stalls} == {final[0]}  # pinned: the chunks' KV is on that instance
    np.testing.assert_allclose([st[2] for st in stalls[:-1]], hand.extend_s(np.array(hand.earlier_chunks)), rtol=1e-4)
    assert stalls[-1][2] == pytest.approx(hand.last_extend_s, rel=1e-4) == final[3]
    # chunk i lands at notice + RTT/2 + sum_{j<i} (RTT + e_j); the last RTT/2 after the final round
    rounds_s = hand.rtt_s + np.array([st[2] for st in stalls[:-1]])
    landed = np.array([st[1] for st in stalls])
    np.testing.assert_allclose(np.diff(landed), rounds_s, rtol=1e-6)
    assert table.relay_tokens[0] == pytest.approx(hand.relay_tokens, rel=1e-4)


def loaded(**handoff: Any) -> RequestTable:
    """small-pdd at its plan rate over a 200 ms line: catch-up rounds of ~24-40 tokens."""
    data = copy.deepcopy(BASE_WORKLOAD)
    data["deployment"]["wan_lines"][0]["rtt_ms"] = 200
    s = build_scenario(
        validate(Plan, plan("small-pdd", handoff=handoff), "plan.yaml"),
        load_input_set(validate(Workload, data, "w"), PLANS),
    )
    return simulate(s, 2_000, seed=1).table


def test_catch_up_threshold_moves_the_relay_share() -> None:
    """A lower threshold runs more rounds (RTT / tau_RLD ~ 24 tokens stays above 16, not above 64):
    the relay decodes more tokens, and finishes more requests on its own before the last chunk."""
    low = loaded(mode="catch-up", catchup_threshold_tokens=16)
    high = loaded(mode="catch-up", catchup_threshold_tokens=64)
    assert low.relay_tokens.sum() > 1.05 * high.relay_tokens.sum()
    assert (low.pipeline == "P-RLD").sum() > (high.pipeline == "P-RLD").sum() + 50


def test_adaptive_load_threshold_switches_between_one_shot_and_catch_up() -> None:
    """adaptive with threshold 0 never catches up (utilization < 0 never holds): one-shot, exactly;
    with threshold 1 it catches up whenever the relay has a free slot (here always): catch-up."""
    one_shot, catch_up = loaded(mode="one-shot"), loaded(mode="catch-up")
    never, always = (
        loaded(mode="adaptive", adaptive_load_threshold=0.0),
        loaded(mode="adaptive", adaptive_load_threshold=1.0),
    )
    np.testing.assert_array_equal(never.relay_tokens, one_shot.relay_tokens)
    np.testing.assert_array_equal(never.worst_gap_s, one_shot.worst_gap_s)
    np.testing.assert_array_equal(always.relay_tokens, catch_up.relay_tokens)
    np.testing.assert_array_equal(always.worst_gap_s, catch_up.worst_gap_s)
    assert always.relay_tokens.sum() > never.relay_tokens.sum()
    handed = (always.pipeline == "P-RLD-MD") & (always.relay_tokens < always.output_tokens)
    assert np.median(always.worst_gap_s[handed]) < np.median(never.worst_gap_s[handed])


@given(
    firsts=st.lists(st.floats(0.0, 5_000.0), min_size=1, max_size=5),
    relay_step_ms=st.floats(5.0, 200.0),
    rtt_ms=st.floats(0.0, 400.0),
    threshold=st.integers(0, 256),
    per_token_ms=st.floats(0.0, 2.0),
    catch_up=st.booleans(),
)
def test_one_requests_rounds_are_the_vectorized_rounds(
    firsts: list[float], relay_step_ms: float, rtt_ms: float, threshold: int, per_token_ms: float, catch_up: bool
) -> None:
    """The simulator's per-request rounds (`catch_up_chunks`, floats) are `catch_up_rounds`' to the
    last bit, for each of several classes rounded together (each stops after its own rounds): the
    same chunks in the same order (at most MAX_CATCHUP_ROUNDS), the same final chunk, the earlier
    extends summing to its `earlier_extend_s` (an extend of 10 ms + per_token x k)."""

    def extend_s(tokens: Any) -> Any:
        return 0.010 + per_token_ms / 1000 * tokens

    rounds = catch_up_rounds(np.array(firsts), relay_step_ms / 1000, rtt_ms / 1000, threshold, extend_s, catch_up)
    for k, first in enumerate(firsts):
        earlier, last = catch_up_chunks(first, relay_step_ms / 1000, rtt_ms / 1000, threshold, extend_s, catch_up)
        assert last == float(rounds.last_chunk_tokens[k])
        assert len(earlier) <= MAX_CATCHUP_ROUNDS
        assert sum(earlier) == pytest.approx(float(rounds.earlier_extend_s[k]), rel=1e-12, abs=1e-15)
        extra = len(earlier) * rtt_ms / 1000 + sum(earlier)
        assert extra == pytest.approx(float(rounds.extra_relay_s[k]), rel=1e-12)


def test_the_relay_fixed_point_stops_when_it_circles(monkeypatch: pytest.MonkeyPatch) -> None:
    """rag-longdoc-lowhit's PDD plan with one relay and one overloaded main decoder: the map
    circles (finished-or-not requests and whole handoff rounds make it a step function) with a
    period of nine iterations, drifting by ~1e-9. It used to run all FIXED_POINT_MAX_ITERATIONS;
    it stops once a state comes back, and a circle's every turn gives the same figures, so its
    relay step is one of the states the plain map visits (to FIXED_POINT_RTOL)."""
    workload = load_workload("rag-longdoc-lowhit")
    spec: dict[str, Any] = {
        "name": "circling",
        "architecture": "pdd",
        "prefill": {
            "datacenter": "dc-a",
            "gpu": "h800",
            "tp": 16,
            "count": 6,
            "expert_parallel": True,
            "tp_attention": True,
        },
        "relay": {"datacenter": "dc-a", "gpu": "h800", "tp": 16, "count": 1, "expert_parallel": True},
        "decode": {"datacenter": "dc-b", "gpu": "h20", "tp": 16, "count": 1, "expert_parallel": True},
        "wan": [{"option": "express-100g", "count": 1}],
    }
    circling = build_scenario(validate(Plan, spec, "plan.yaml"), load_input_set(workload))
    stopped = evaluate(circling)
    assert 10 < stopped.fixed_point_iterations < analytic.FIXED_POINT_MAX_ITERATIONS
    monkeypatch.setattr(analytic, "FIXED_POINT_CYCLE", 1)  # the plain map: only a repeat of the last state stops it
    plain = build_scenario(validate(Plan, spec, "plan.yaml"), load_input_set(workload))  # not the evaluation kept
    states = []
    original = analytic._same_state

    def recorded(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        states.append(a[0])
        return original(a, b)

    monkeypatch.setattr(analytic, "_same_state", recorded)
    assert evaluate(plain).fixed_point_iterations == analytic.FIXED_POINT_MAX_ITERATIONS
    relay_step = stopped.stages["relay"].step_s
    assert min(abs(relay_step - s) / s for s in states) <= analytic.FIXED_POINT_RTOL
