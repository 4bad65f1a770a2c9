"""A relay on the prefill instances (`relay_on_prefill`): the mixed-step physics
(`pddplan.perf.mixed`), the closed form, the simulator's `ColocatedRelay`, and the optimizer's
choice between it and a dedicated relay."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.api import scenario_of
from pddplan.evaluate import evaluate
from pddplan.evaluate.classes import request_classes
from pddplan.inputs import load_workload
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import optimize_architecture
from pddplan.optimize.options import OptimizeOptions, RelayPlacement
from pddplan.perf.mixed import busy_step_s, colocated_token_s, relay_marginal_step_s
from pddplan.perf.roofline import linear_step_s, prefill_cost, step_time
from pddplan.simulate import simulate
from pddplan.simulate.prefill import PrefillPool, run_prefill_pool
from pddplan.simulate.servers import ColocatedRelay
from pddplan.specs.plan import Plan

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "workloads" / "pdd-agent-64k.yaml"
DEDICATED = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"


def colocated_plan_file(tmp_path: Path) -> Path:
    """The shipped hand-written PDD plan with its relay moved onto the prefill instances."""
    spec = yaml.safe_load(DEDICATED.read_text())
    del spec["relay"]
    spec["relay_on_prefill"] = True
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# -- the physics, by hand ------------------------------------------------------------------------------
def test_token_time_mixes_busy_and_idle_rates_by_hand() -> None:
    """tau_co = 1 / (rho / s_mix + (1 - rho) / tau): 1 / (0.5 / 0.2 + 0.5 / 0.05) = 1 / 12.5 = 0.08 s."""
    assert float(colocated_token_s(0.5, 0.2, 0.05)) == pytest.approx(0.08, rel=1e-12)
    assert float(colocated_token_s(0.0, 0.2, 0.05)) == pytest.approx(0.05, rel=1e-12)  # never busy
    assert float(colocated_token_s(1.0, 0.2, 0.05)) == pytest.approx(0.2, rel=1e-12)  # always busy
    assert float(colocated_token_s(1.7, 0.2, 0.05)) == pytest.approx(0.2, rel=1e-12)  # rho clipped at 1


def test_marginal_step_is_the_extra_rows_plus_decode_attention(tmp_path: Path) -> None:
    """m(b) = T_lin(C + b) - T_lin(C) + A_dec(b, context), and m(0) = 0."""
    instance = scenario_of(colocated_plan_file(tmp_path), WORKLOAD).prefill.instance
    chunk, context = 8192, 60_000.0
    rows = float(linear_step_s(instance, chunk + 8.0) - linear_step_s(instance, float(chunk)))
    attention = float(step_time(instance, 1.0, context, 8.0).attention_s)
    assert float(relay_marginal_step_s(instance, 8.0, context, chunk)) == pytest.approx(rows + attention, rel=1e-12)
    assert float(relay_marginal_step_s(instance, 0.0, context, chunk)) == 0.0


def test_busy_step_is_a_requests_own_chunk_step(tmp_path: Path) -> None:
    """s_C = E[A] / E[chunks] (A a request's chunks' engine time alone), whatever a full chunk
    takes; the full step T_lin(C) + C a when nothing is prefilled. Under data-parallel attention a
    full step has a chunk on every rank, T_lin(r C) + C a (the hand plan's TP16 EP prefill: 0.82 s),
    and a lone chunk runs on one rank while the others idle: less than the full step (0.63 s for a
    lone 8,192-token chunk) and more than its 1/16 share of it."""
    scenario = scenario_of(colocated_plan_file(tmp_path), WORKLOAD)
    instance = scenario.prefill.instance
    full = float(linear_step_s(instance, 4096.0)) + 4096 * 2e-6
    for mean_chunk_s in (full / 3, full * 3):
        assert busy_step_s(instance, 4096, 2e-6, mean_chunk_s) == pytest.approx(mean_chunk_s, rel=1e-12)
    assert busy_step_s(instance, 4096, 2e-6, 0.0) == pytest.approx(full, rel=1e-12)
    # on the workload's requests: E[A] / E[chunks] by hand
    classes = request_classes(scenario)
    chunk, prob = scenario.chunk_tokens, classes.input_prob
    chunks = float(np.ceil(classes.new_tokens / chunk) @ prob)
    by_hand = float(classes.prefill_alone_s @ prob) / chunks
    attention = classes.attention_s_per_new_token()
    busy = busy_step_s(instance, chunk, attention, classes.alone_s_per_chunk())
    assert busy == pytest.approx(by_hand, rel=1e-12)
    # data-parallel attention: a lone full chunk between the full lockstep step and its share of it
    assert instance.uses_dp_attention
    ranks = instance.attention_ranks
    full_step = float(linear_step_s(instance, float(chunk * ranks))) + chunk * attention
    assert busy_step_s(instance, chunk, attention, 0.0, ranks) == pytest.approx(full_step, rel=1e-12)
    lone = prefill_cost(instance, float(chunk), 0.0, chunk)
    assert float(lone.alone_s) > float(lone.batched_s)  # the same chunk, alone and its share
    assert full_step / ranks < float(lone.alone_s) < full_step


@settings(max_examples=30, deadline=None)
@given(
    rho=st.floats(0.0, 1.0),
    mixed=st.floats(1e-3, 1.0),
    alone=st.floats(1e-3, 1.0),
    more=st.floats(0.0, 1.0),
)
def test_busier_prefill_never_speeds_relay_tokens(rho: float, mixed: float, alone: float, more: float) -> None:
    """With mixed steps no shorter than decode steps, a busier prefill never makes tau_co shorter,
    and tau_co lies between the two step times."""
    mixed = max(mixed, alone)
    low = float(colocated_token_s(rho, mixed, alone))
    high = float(colocated_token_s(min(rho + more, 1.0), mixed, alone))
    assert high >= low * (1 - 1e-12)
    assert alone * (1 - 1e-12) <= low <= mixed * (1 + 1e-12)


# -- the simulator's relay -----------------------------------------------------------------------------
def test_colocated_relay_rides_prefill_steps_then_decodes_alone_by_hand() -> None:
    """Prefill steps [0, 1) and [1, 2), decode step 0.5 s: a sequence of 3 tokens joining at 0 gets
    its first token at 1 (end of the first step), its second at 2, its third at 2.5 (idle)."""
    relay = ColocatedRelay(0, [0.5, 0.5, 0.5], 2, starts=[0.0, 1.0], ends=[1.0, 2.0])
    assert relay.admit(7, 3.0, 0.0, 0.0) == pytest.approx(1.0)
    assert relay.next_finish() == pytest.approx(2.5)
    relay.advance(1.5)
    assert relay.tokens_done(7) == pytest.approx(1.5)
    assert relay.step_s() == pytest.approx(1.0)  # inside a 1 s prefill step
    relay.advance(2.25)
    assert relay.tokens_done(7) == pytest.approx(2.5)
    assert relay.step_s() == pytest.approx(0.5)  # idle: its own decode step


def test_colocated_relay_idle_gap_between_steps_by_hand() -> None:
    """Steps [0, 1) and [3, 4), decode step 0.5 s: joining at 1 with 5 tokens, the idle gap [1, 3)
    gives 4 tokens, the step [3, 4) the fifth at 4."""
    relay = ColocatedRelay(0, [0.5, 0.5], 1, starts=[0.0, 3.0], ends=[1.0, 4.0])
    assert relay.admit(1, 5.0, 1.0, 0.0) == pytest.approx(1.5)
    assert relay.next_finish() == pytest.approx(4.0)


def test_prefill_run_records_each_instances_steps() -> None:
    """Steps of an instance do not overlap, add up to the busy time, and include the relay's share."""
    pool = PrefillPool(instances=2, chunk_tokens=1000, linear_s=[0.001 * t for t in range(1001)], extra_step_s=0.01)
    arrival = np.array([0.0, 0.1, 0.2, 0.25, 3.0])
    run = run_prefill_pool(pool, arrival, np.full(5, 1500.0), np.full(5, 0.05))
    total = 0.0
    for starts, ends in run.steps:
        assert all(e > s for s, e in zip(starts, ends, strict=True))
        assert all(ends[j] <= starts[j + 1] + 1e-12 for j in range(len(starts) - 1))
        total += sum(e - s for s, e in zip(starts, ends, strict=True))
    assert total == pytest.approx(run.busy_s, rel=1e-12)
    assert sum(len(starts) for starts, _ in run.steps) * 0.01 <= run.busy_s
    assert set(run.instance.tolist()) <= {0, 1}


# -- the plan and the closed form ----------------------------------------------------------------------
def test_relay_on_prefill_and_relay_instances_are_exclusive() -> None:
    spec = yaml.safe_load(DEDICATED.read_text())
    spec["relay_on_prefill"] = True
    with pytest.raises(ValueError, match="not both"):
        Plan.model_validate(spec)
    intra = copy.deepcopy(spec)
    del intra["relay"]
    intra.update(architecture="pd-intra", wan=[], routing={}, handoff={})
    intra["decode"]["datacenter"] = intra["prefill"]["datacenter"]
    with pytest.raises(ValueError, match="has no relay; remove relay_on_prefill"):
        Plan.model_validate(intra)


def test_colocated_relay_costs_the_relay_less_and_slows_prefill(tmp_path: Path) -> None:
    """Costs add up: the same plan without its relay instances costs exactly their $/h less. The
    relayed requests skip the RDMA copy; prefill carries the relay's tokens, so it is at least as busy."""
    dedicated = scenario_of(DEDICATED, WORKLOAD)
    colocated = scenario_of(colocated_plan_file(tmp_path), WORKLOAD)
    assert dedicated.relay is not None
    assert colocated.cost_per_hour == pytest.approx(dedicated.cost_per_hour - dedicated.relay.usd_per_hour, rel=1e-12)
    a, b = evaluate(dedicated), evaluate(colocated)
    assert b.stages["prefill"].utilization >= a.stages["prefill"].utilization
    assert b.stages["relay"].instances == colocated.prefill.count
    # the mixed step is the relayed tokens' longest gap: longer than a plain decode step
    assert b.worst_gap_p99_s >= b.stages["relay"].step_s
    assert b.sla_met


def test_simulation_agrees_with_the_closed_form(tmp_path: Path) -> None:
    """Two seeds of 20,000 requests: relay share, relayed TTFT P90 and relay utilization within
    stated tolerances of the closed form (the simulator's relay decodes in the prefill steps it
    simulates; the closed form mixes busy and idle rates).

    The prefill instances run tensor-parallel attention, at 2 req/s (~58% busy), where a chunk of one
    request and a packed chunk cost alike. Under data-parallel attention a lone chunk runs its
    attention and dense layers on one rank, ~4.5x a packed chunk: the closed form's busy step (a
    request's own chunk alone) and the simulator's mix of lone and packed steps then part with the
    load, the closed-form queue's known limit there (docs/model.md, section 7)."""
    spec = yaml.safe_load(colocated_plan_file(tmp_path).read_text())
    spec["prefill"]["tp_attention"] = True
    spec["rate_rps"] = 2.0
    path = tmp_path / "colocated-tp-attention.yaml"
    path.write_text(yaml.safe_dump(spec))
    scenario = scenario_of(path, WORKLOAD)
    closed = evaluate(scenario)
    for seed in (0, 1):
        sim = simulate(scenario, 20_000, seed).summary.json_data()
        assert sim["rld_token_share"] == pytest.approx(closed.rld_token_share, rel=0.15)
        relayed = next(p["ttft_p90_s"] for p in sim["pipelines"] if p["pipeline"] == "P-RLD-MD")
        assert relayed == pytest.approx(closed.pipelines["P-RLD-MD"]["ttft_p90_s"], rel=0.10)
        assert sim["utilization"]["relay"] == pytest.approx(closed.stages["relay"].utilization, rel=0.15)
        assert sim["sla_met"]


# -- the optimizer's choice ----------------------------------------------------------------------------
def starved(tmp_path: Path) -> Any:
    """pdd-agent-64k with 16 GPU-A in the home datacenter (one TP16 instance), at 1 req/s: a rate
    one TP16 prefill instance carries (at 4 req/s, where a lone prefill runs its attention and dense
    layers on one data-parallel rank, it takes more than one)."""
    spec = yaml.safe_load(WORKLOAD.read_text())
    spec["name"] = "starved-a"
    spec["deployment"]["datacenters"][0]["gpus"][0]["max_count"] = 16
    spec["arrival"]["rate_rps"] = 1.0
    path = tmp_path / "starved-a.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_input_set(load_workload(str(path)), tmp_path)


def test_one_instance_of_gpu_a_is_enough_when_the_relay_runs_on_prefill(tmp_path: Path) -> None:
    inputs = starved(tmp_path)
    dedicated = optimize_architecture(inputs, "pdd", OptimizeOptions(verify=False, relay_placement="dedicated"))
    assert not dedicated.feasible
    auto = optimize_architecture(inputs, "pdd", OptimizeOptions(verify=False))
    assert auto.feasible and auto.plan is not None
    assert auto.plan.relay_on_prefill and auto.plan.relay is None and auto.plan.prefill.gpus == 16


@pytest.mark.parametrize("placement", ["dedicated", "prefill"])
def test_relay_placement_option_is_obeyed(placement: RelayPlacement) -> None:
    from pddplan.inputs import workload_dir

    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    result = optimize_architecture(inputs, "pdd", OptimizeOptions(verify=False, relay_placement=placement))
    assert result.feasible and result.plan is not None
    assert result.plan.relay_on_prefill == (placement == "prefill")
    assert (result.plan.relay is not None) == (placement == "dedicated")


def test_auto_is_no_worse_than_either_placement() -> None:
    from pddplan.inputs import workload_dir

    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    bcr = {}
    for placement in ("auto", "dedicated", "prefill"):
        result = optimize_architecture(inputs, "pdd", OptimizeOptions(verify=False, relay_placement=placement))
        assert result.evaluation is not None
        bcr[placement] = result.evaluation.bcr
    assert bcr["auto"] >= max(bcr["dedicated"], bcr["prefill"]) * (1 - 1e-9)


def test_fast_sizing_moves_the_relay_onto_prefill_when_it_is_no_dearer() -> None:
    """bathtub and sweep size plans without the program; they compare the relay's placements too."""
    from pddplan.inputs import workload_dir
    from pddplan.optimize.sizing import choose_shape, relay_on_prefill_if_cheaper, size_plan
    from pddplan.scenarios import build_scenario

    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    sized = size_plan(inputs.workload, choose_shape(inputs, "pdd"))
    assert sized.plan.relay is not None
    moved = relay_on_prefill_if_cheaper(sized, inputs)
    assert moved.plan.relay_on_prefill and moved.plan.relay is None
    before, after = build_scenario(sized.plan, inputs), build_scenario(moved.plan, inputs)
    assert after.cost_per_hour <= before.cost_per_hour
    assert evaluate(after).sla_met
    intra = size_plan(inputs.workload, choose_shape(inputs, "pd-intra"))
    assert relay_on_prefill_if_cheaper(intra, inputs) is intra  # no relay: nothing to move


@settings(max_examples=20, deadline=None)
@given(low=st.floats(0.0, 64.0), high=st.floats(0.0, 64.0))
def test_more_relay_sequences_never_cost_a_mixed_step_less(low: float, high: float) -> None:
    from pddplan.inputs import load_hardware, load_model
    from pddplan.perf import Instance

    instance = Instance(load_model("deepseek-v3.2"), load_hardware("gpu-a"), 16)
    low, high = sorted((low, high))
    cheap = float(relay_marginal_step_s(instance, low, 60_000.0, 8192))
    dear = float(relay_marginal_step_s(instance, high, 60_000.0, 8192))
    assert dear >= cheap * (1 - 1e-12) and cheap >= 0


@pytest.mark.parametrize("extra", [1, 2])
def test_more_prefill_instances_never_raise_the_relayed_ttft(tmp_path: Path, extra: int) -> None:
    """More GPUs never raise TTFT: the co-located plan with more prefill instances (each carrying
    a share of the relay) has no higher TTFT tails, overall and on the relayed pipeline."""
    spec = yaml.safe_load(colocated_plan_file(tmp_path).read_text())
    base = evaluate(scenario_of(colocated_plan_file(tmp_path), WORKLOAD))
    spec["prefill"]["count"] += extra
    wider_path = tmp_path / f"wider-{extra}.yaml"
    wider_path.write_text(yaml.safe_dump(spec))
    wider = evaluate(scenario_of(wider_path, WORKLOAD))

    def no_higher(new: float, old: float) -> bool:  # quantiles are resolved to 1 ms or 0.1% (mixture_quantiles)
        return new <= max(old * 1.001, old + 1e-3)

    assert no_higher(wider.ttft.p90_s, base.ttft.p90_s)
    assert no_higher(wider.ttft.p99_s, base.ttft.p99_s)
    relayed = "P-RLD-MD"
    assert no_higher(wider.pipelines[relayed]["ttft_p90_s"], base.pipelines[relayed]["ttft_p90_s"])
    assert wider.stages["prefill"].utilization < base.stages["prefill"].utilization
