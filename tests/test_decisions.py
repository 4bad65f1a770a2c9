"""Decisions that hold: a plan that is not physically possible (an instance that cannot hold the
longest prompt's KV) is refused with the reason, and the optimizer never writes one. (Every shipped
workload's optimized plans are checked whole in tests/test_plans_are_minimal.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pddplan.errors import InputError
from pddplan.evaluate import evaluate
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.optimize import optimize_architecture
from pddplan.optimize.frontier import deployment
from pddplan.optimize.options import OptimizeOptions
from pddplan.scenarios import build_scenario
from pddplan.simulate.sequential import verify
from pddplan.specs.distributions import FixedLength
from pddplan.specs.plan import Plan
from pddplan.specs.workload import GpuOffer


def agent_with_offers(datacenter: str, offers: Callable[[list[GpuOffer]], list[GpuOffer]]) -> InputSet:
    """pdd-agent-64k with `datacenter`'s GPU offers replaced by `offers(its offers)`."""
    workload = load_workload("pdd-agent-64k")
    datacenters = [
        dc.model_copy(update={"gpus": offers(dc.gpus)}) if dc.name == datacenter else dc
        for dc in workload.deployment.datacenters
    ]
    variant = workload.model_copy(
        update={"deployment": workload.deployment.model_copy(update={"datacenters": datacenters})}
    )
    return load_input_set(variant, workload_dir("pdd-agent-64k"))


def agent_with_h20() -> InputSet:
    """pdd-agent-64k with 64 H20 offered in datacenter A beside GPU-A."""
    return agent_with_offers("dc-a", lambda gpus: [*gpus, gpus[0].model_copy(update={"type": "h20", "max_count": 64})])


H20_PREFILL = {
    "architecture": "pdd",
    "prefill": {"datacenter": "dc-a", "gpu": "h20", "tp": 8, "count": 2},
    "relay": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 1},
    "decode": {"datacenter": "dc-b", "gpu": "gpu-b", "tp": 16, "count": 2},
    "wan": [{"option": "express-40g", "count": 1}],
}


def test_prefill_on_instances_too_small_for_one_prompt_is_refused() -> None:
    """DeepSeek-V3.2 on 8 x H20 leaves ~1.15 GB of KV per instance: 8 x 96 GB at 90% is 691.2 GB, less
    673.9 GB of weights (FP8 with a 4-byte scale per 128 x 128 block, 1 + 4/16384 B per weight) and
    8 x 1.0 GB of activations is 9.2 GB, over 8 copies (the MLA latent is kept on every TP rank);
    a 64,512-token FP8 prompt needs 3.1 GB (48,068 B/token)."""
    inputs = agent_with_h20()
    with pytest.raises(InputError) as info:
        build_scenario(Plan.model_validate(H20_PREFILL), inputs, source="plan.yaml")
    message = str(info.value)
    assert message.startswith("plan.yaml: prefill: one h20 TP8 instance keeps 1.15 GB of KV")
    assert "the longest prompt (64,512 tokens) needs 3.1 GB" in message
    assert "\n" not in message


def test_optimizer_never_prefills_where_a_prompt_does_not_fit() -> None:
    inputs = agent_with_h20()
    result = optimize_architecture(inputs, "pdd", OptimizeOptions(verify=False))
    assert result.feasible and result.plan is not None
    assert (result.plan.prefill.gpu, result.plan.prefill.tp) != ("h20", 8)


def test_singular_filter_leaves_the_main_decoders_more_memory() -> None:
    """A singular transfer the filter cancels never lands, so its prefix takes no room in the main
    decoders' radix cache: with the filter on (and some singular traffic) each main decoder holds
    more sequences than with it off, and the simulation reserves what the closed form plans."""
    from pddplan.simulate.engine import _Simulation

    workload = load_workload("pdd-agent-64k")
    hbm_only = workload.serving.model_copy(update={"cache_tiers": "hbm"})  # the radix cache takes decoder HBM
    short = workload.model_copy(
        update={"output_tokens": FixedLength(kind="fixed", tokens=40), "serving": hbm_only}
    )  # most relayed requests finish on the relay
    inputs = load_input_set(short, workload_dir("pdd-agent-64k"))
    plan = load_plan(str(Path(__file__).parent / "data" / "plans" / "pdd-agent-64k-moderate.yaml"))
    off = plan.model_copy(
        update={"routing": plan.routing.model_copy(update={"hit_threshold": 0.99, "singular_filter": False})}
    )
    on = plan.model_copy(
        update={"routing": plan.routing.model_copy(update={"hit_threshold": 0.99, "singular_filter": True})}
    )
    with_filter = evaluate(build_scenario(on, inputs, source="plan"))
    without = evaluate(build_scenario(off, inputs, source="plan"))
    assert with_filter.singular_share > 0.2
    assert with_filter.stages["decode"].max_batch > without.stages["decode"].max_batch
    sim = _Simulation(build_scenario(on, inputs, source="plan"), 10, np.random.default_rng(0))
    assert all(inst.max_batch == int(with_filter.stages["decode"].max_batch) for inst in sim.pools["decode"])


def test_trimming_takes_back_an_instance_the_closed_form_does_not_need() -> None:
    """The optimizer's trim lowers a role's count while the closed form still meets the SLA at no
    worse a score: a pd-intra plan with one decode instance too many comes back at its own size."""
    from pddplan.optimize.problem import ProblemBuilder, build_setup
    from pddplan.optimize.search import _Pick, _trimmed

    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    options = OptimizeOptions(verify=False)
    best = optimize_architecture(inputs, "pd-intra", options)
    assert best.plan is not None and best.evaluation is not None
    bigger = best.plan.model_copy(
        update={"decode": best.plan.decode.model_copy(update={"count": best.plan.decode.count + 1})}
    )
    scenario = build_scenario(bigger, inputs, source="plan")
    evaluation = evaluate(scenario)
    pick = _Pick((evaluation.bcr, -evaluation.ttft.p99_s, 0.0), bigger, evaluation, scenario, None)
    setup = build_setup(inputs, "pd-intra", inputs.workload.arrival.rate_rps)
    trimmed = _trimmed(pick, ProblemBuilder(setup, options))
    assert trimmed.plan.decode is not None and best.plan.decode is not None
    assert trimmed.plan.decode.count == best.plan.decode.count
    assert trimmed.untrimmed is pick
    assert trimmed.evaluation.cost_per_hour < evaluation.cost_per_hour


def test_the_search_evaluates_each_plan_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ProblemBuilder.evaluated`: a plan met again (a later round, a trim) reuses its figures, and a
    plan the inputs cannot hold (more instances than the datacenter offers) is None, not an error."""
    from pddplan.optimize import problem

    calls: list[Plan] = []

    def counted(scenario: object, rate_rps: float | None = None) -> object:
        calls.append(scenario.plan)  # type: ignore[attr-defined]
        return evaluate(scenario, rate_rps)

    monkeypatch.setattr(problem, "evaluate", counted)
    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    builder = problem.ProblemBuilder(problem.build_setup(inputs, "pdd", 1.0), OptimizeOptions())
    plan = load_plan(str(Path(__file__).parent.parent / "examples/plans/pdd-agent-64k-pdd.yaml"))
    first = builder.evaluated(plan)
    again = builder.evaluated(plan.model_copy(deep=True))
    assert first is not None and again is first and calls == [plan]
    assert first[1] == evaluate(build_scenario(plan, inputs, source="plan"))
    assert builder.evaluated(plan.with_count("prefill", 10_000)) is None
    assert len(calls) == 1


def agent_with_gpu_b_at(usd_per_gpu_hour: float) -> InputSet:
    """pdd-agent-64k with GPU-B rented at `usd_per_gpu_hour`."""
    return agent_with_offers("dc-b", lambda gpus: [gpus[0].model_copy(update={"usd_per_gpu_hour": usd_per_gpu_hour})])


def test_a_dearer_gpu_never_lowers_the_optimized_cost() -> None:
    """The program's capacities are conservative by different margins per GPU kind, so the kind it
    prefers can lose once both are trimmed: at $3.00 a GPU-B hour agg chose 56 GPU-B ($168/h) though
    112 GPU-A ($153.44/h) met the SLA in closed form, and at $3.15 it found the GPU-A plan. The
    search now trims the best plan of another prefill kind too, so raising a price never lowers
    the cost (closed form, no simulation)."""
    costs = []
    for usd in (2.8, 2.9, 3.0, 3.15):
        result = optimize_architecture(agent_with_gpu_b_at(usd), "agg", OptimizeOptions(verify=False))
        assert result.evaluation is not None
        costs.append(result.evaluation.cost_per_hour)
    assert costs == sorted(costs), costs
    assert costs[2] == pytest.approx(112 * 1.37, rel=1e-9)  # 112 GPU-A at the profile's $1.37


def test_a_plan_the_simulation_rejects_falls_back_to_the_next_best_of_its_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At $3.00 a GPU-B hour the trimmed GPU-A plan ($153.44/h) misses the SLA in the verifying
    simulation; the search then verifies the round's next plans by score, so the answer is the
    trimmed GPU-B plan ($168/h), not GPU-A's untrimmed program plan ($175.36/h). The next round
    trims back to the rejected GPU-A plan and simulates nothing again: it ends the search (it
    simulated that plan in each of four rounds before)."""
    from pddplan.optimize import search

    simulated: list[str] = []

    def counted(scenario: Any, *args: Any) -> Any:
        simulated.append(deployment(scenario.plan))
        return verify(scenario, *args)

    monkeypatch.setattr(search, "verify", counted)
    result = optimize_architecture(agent_with_gpu_b_at(3.0), "agg", OptimizeOptions(jobs=1))
    assert len(simulated) == len(set(simulated)) and result.rounds <= 2
    assert result.feasible and result.simulation is not None and result.simulation.sla_met
    assert result.evaluation is not None
    assert result.evaluation.cost_per_hour == pytest.approx(56 * 3.0, rel=1e-9)
