"""Co-located serving (agg): the operating-point equations by hand, plan files, the closed form
against the simulation on every shipped workload, and the optimizer's side-by-side verdict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pddplan.architectures import Pipeline
from pddplan.evaluate import evaluate
from pddplan.evaluate.colocated import MixedSteps, operating_point
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.optimize import optimize_architecture
from pddplan.optimize.options import OptimizeOptions
from pddplan.scenarios import build_scenario
from pddplan.simulate.engine import simulate_requests
from pddplan.specs.plan import Plan

ROOT = Path(__file__).resolve().parent.parent
# m(b) for b = 0..2, tau_dec(b) for b = 1..2, s_C: numbers small enough to follow by hand
STEPS = MixedSteps(marginal_s=np.array([0.0, 0.01, 0.02]), alone_s=np.array([0.02, 0.03]), busy_s=0.1, full_chunk_s=0.1)


def test_a_lone_row_decodes_at_the_plain_step_when_prefill_is_idle() -> None:
    # rho_0 = 0: tau(b) = tau_dec(b); r E[O] = 10 * 0.1 = 1 -> B = 1 * tau(1) = 0.02 (below one row)
    point = operating_point(STEPS, 10.0, 0.0, 0.1, 2.0)
    assert point.batch[0] == pytest.approx(0.02)
    assert point.token_s[0] == pytest.approx(0.02)
    # f(0.02) = 1 + m(0.02) / s_C = 1 + 0.0002 / 0.1
    assert point.slowdown[0] == pytest.approx(1.002)
    assert bool(point.stable[0])


def test_the_batch_solves_littles_law_at_the_mixed_token_time() -> None:
    # rho(b) = 0.5 (1 + m(b) / 0.1) = 0.55, 0.6; tau(1) = 1 / (0.55 / 0.11 + 0.45 / 0.02) = 1 / 27.5,
    # tau(2) = 1 / (0.6 / 0.12 + 0.4 / 0.03) = 3 / 55; r E[O] = 30: the residual 30 tau(b) - b is
    # +1/11 at b = 1 and -4/11 at b = 2, so B = 1 + (1/11) / (5/11) = 1.2, tau = 0.8 tau(1) + 0.2 tau(2) = 0.04
    point = operating_point(STEPS, 300.0, 0.5, 0.1, 2.0)
    assert point.batch[0] == pytest.approx(1.2)
    assert point.token_s[0] == pytest.approx(0.04)
    assert point.batch[0] == pytest.approx(300.0 * 0.1 * point.token_s[0])
    assert point.slowdown[0] == pytest.approx(1.0 + 0.012 / 0.1)
    assert point.busy_fraction[0] == pytest.approx(0.5 * 1.12)
    assert point.mixed_s[0] == pytest.approx(0.1 + 0.012)
    assert point.alone_s[0] == pytest.approx(0.022)


def test_a_batch_beyond_the_room_or_a_saturated_prefill_is_unstable() -> None:
    rows = operating_point(
        STEPS, np.array([300.0, 300.0, 1.0]), np.array([0.5, 0.5, 1.0]), 0.1, np.array([2.0, 1.0, 2.0])
    )
    assert rows.stable.tolist() == [True, False, False]  # room 1 < B = 1.2; rho = rho_0 f(B) >= 1
    assert math.isinf(rows.token_s[1]) and math.isinf(rows.token_s[2])


def test_the_crossing_is_found_in_any_block_of_batches() -> None:
    # idle prefill, no marginal step: tau(b) = tau_dec(b) = 0.01 up to b = 40, 0.02 beyond, M = 100.
    # B is where r E[O] tau(b) = b first holds: 0.5 (below one row), 7.25 and 30 (r E[O] 0.01 = B),
    # 81 (r E[O] = 4050: 40.5 > 40, so 4050 * 0.02 = 81), none (r E[O] = 6000: 60 > 40, 120 > 100);
    # the first whole batch at or past B lies in the first, second and third block the scan takes
    steps = np.concatenate([np.full(40, 0.01), np.full(60, 0.02)])
    flat = MixedSteps(marginal_s=np.zeros(101), alone_s=steps, busy_s=0.1, full_chunk_s=0.1)
    rows = operating_point(flat, np.array([50.0, 725.0, 3000.0, 4050.0, 6000.0]), 0.0, 1.0, 100.0)
    assert rows.batch.tolist() == pytest.approx([0.5, 7.25, 30.0, 81.0, math.inf])
    assert rows.stable.tolist() == [True, True, True, True, False]
    assert rows.token_s[:4].tolist() == pytest.approx([0.01, 0.01, 0.01, 0.02])


def test_the_batch_is_the_first_whole_batch_crossing_under_prefill_sharing() -> None:
    # prefill busy (rho_0 = 0.3, and 0.9 on the last row), decode rows slowing its steps
    # (m(b) = 0.002 b + 1e-5 b^2) and each row its own busy step s_C = 0.1 (1 - p) + 0.2 p: with
    # tau(b) as the module docstring writes it, every B lies past the last whole batch whose
    # residual r E[O] tau(b) - b is positive, up to the first that is not (in the first to the
    # third block the scan takes); a stable row's B solves Little's law at the interpolated token
    # time. The last row saturates prefill (rho_0 f(b) reaches 1, where busy is clipped): unstable.
    with_zero = np.arange(0.0, 201.0)
    batches = with_zero[1:]
    steps = MixedSteps(
        marginal_s=0.002 * with_zero + 1e-5 * with_zero**2, alone_s=0.02 + 1e-4 * batches, busy_s=0.1, full_chunk_s=0.2
    )
    rates = np.array([50.0, 400.0, 800.0, 920.0, 230.0])
    waiting = np.array([0.0, 0.5, 1.0, 0.25, 0.25])
    rho_0 = np.array([0.3, 0.3, 0.3, 0.3, 0.9])
    point = operating_point(steps, rates, rho_0, 1.0, 200.0, waiting)
    busy_step = 0.1 * (1 - waiting) + 0.2 * waiting
    marginal = 0.002 * batches + 1e-5 * batches**2
    busy = np.clip(rho_0[:, None] * (1 + marginal[None, :] / busy_step[:, None]), 0.0, 1.0)
    tau = 1 / (busy / (busy_step[:, None] + marginal) + (1 - busy) / (0.02 + 1e-4 * batches))
    residual = rates[:, None] * tau - batches
    assert point.stable.tolist() == [True, True, True, True, False]
    assert point.batch.max() > 48  # the last row crosses in the third block
    for row, batch in enumerate(point.batch):
        low = max(math.floor(batch), 1) - 1  # the column of the last whole batch at or below B
        assert (residual[row, :low] > 0).all() and residual[row, low + 1] <= 0
        if point.stable[row]:
            share = max(batch, 1.0) - (low + 1)
            assert point.token_s[row] == pytest.approx(tau[row, low] * (1 - share) + tau[row, low + 1] * share)
            assert batch == pytest.approx(rates[row] * point.token_s[row])


def _inputs(name: str) -> InputSet:
    return load_input_set(load_workload(name), workload_dir(name))


def test_an_agg_plan_names_one_role() -> None:
    plan = Plan.model_validate(
        {"architecture": "agg", "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 8}}
    )
    assert plan.decode is None and list(plan.roles()) == ["prefill"]
    scenario = build_scenario(plan, _inputs("pdd-agent-64k"))
    # the decoders are the prefill instances: priced once
    assert scenario.cost_per_hour == pytest.approx(scenario.prefill.usd_per_hour)
    assert scenario.decode.count == 8 and scenario.colocated_pool == "decode"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"decode": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 1}}, "remove `decode`"),
        ({"wan": [{"option": "express-40g", "count": 1}]}, "remove `wan`"),
        ({"relay_on_prefill": True}, "remove `relay_on_prefill`"),
    ],
)
def test_an_agg_plan_with_a_second_role_is_refused(extra: dict[str, object], message: str) -> None:
    data = {"architecture": "agg", "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 8}, **extra}
    with pytest.raises(ValueError, match=message):
        Plan.model_validate(data)


def test_a_disaggregated_plan_without_decoders_is_refused() -> None:
    with pytest.raises(ValueError, match="pd-intra needs decode instances"):
        Plan.model_validate(
            {"architecture": "pd-intra", "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 1}}
        )


def test_cli_refuses_an_agg_plan_with_decoders_in_one_line(tmp_path: Path, cli: Any) -> None:
    plan = tmp_path / "agg.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "architecture": "agg",
                "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 8},
                "decode": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 1},
            }
        )
    )
    result = cli("evaluate", str(plan), "pdd-agent-64k")
    assert result.exit_code == 2
    assert "remove `decode`" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_more_instances_never_slow_an_agg_pool() -> None:
    inputs = _inputs("pdd-agent-64k")
    ttft = []
    for count in (8, 10, 12):
        plan = Plan.model_validate(
            {"architecture": "agg", "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": count}}
        )
        evaluation = evaluate(build_scenario(plan, inputs))
        assert evaluation.stages["decode"].instances == count
        ttft.append((evaluation.ttft.p90_s, evaluation.tpot.p90_s))
    assert ttft == sorted(ttft, reverse=True)


SHIPPED = sorted(p.stem for p in (ROOT / "workloads").glob("*.yaml"))

#: Where the closed form is known to be optimistic, and by how much the simulated P90 TTFT may exceed
#: it. Since the decode all-to-alls run DeepEP's low-latency kernels (2026-12-06) the program's agg
#: plans have fewer instances, their batch slots 74-76% busy in closed form, where its G/G/c slot
#: queue (slot holds independent of the prefill bursts that slow the decode steps freeing them)
#: is optimistic: coding-agent-128k's 5 x B200 plan simulates at P90 4.3-8.9 s against 2.4 s (it
#: still meets its SLA in 10,000-request simulations at three seeds, P99 24-27 s of 30 s), the
#: pdd-agent-64k family's 7 x gpu-b plan at 4.1 s against 3.4 s. Open work (docs/model.md).
OPTIMISTIC = {"coding-agent-128k": 4.0, "pdd-agent-64k": 1.5, "pdd-agent-64k-day": 1.5, "pdd-agent-64k-hetero": 1.5}


@pytest.mark.parametrize("workload", SHIPPED)
def test_agg_closed_form_and_simulation_agree_on_every_shipped_workload(workload: str) -> None:
    """The program's agg plan (before verification), evaluated in closed form and simulated:
    P90 TTFT within 15% (where `OPTIMISTIC` names the workload: the closed form below the simulation
    by at most that factor, the simulation inside the P90 target); a workload agg cannot serve within
    its inventory is reported as such."""
    inputs = _inputs(workload)
    result = optimize_architecture(inputs, "agg", OptimizeOptions(verify=False))
    if result.plan is None:
        assert not result.feasible and result.infeasibility
        assert result.infeasibility[0]["constraint"] in ("inventory", "prefill-capacity", "prefill-cache")
        return
    scenario = result.scenario
    assert scenario is not None
    closed = evaluate(scenario).ttft.p90_s
    table, _ = simulate_requests(scenario, 20_000, 1)
    assert set(table.pipeline) == {Pipeline.COLOCATED.value}
    simulated = float(np.nanpercentile(table.ttft_s, 90))
    if workload in OPTIMISTIC:
        assert closed < simulated <= OPTIMISTIC[workload] * closed
        assert simulated <= scenario.workload.sla.ttft_p90_s
        return
    assert closed == pytest.approx(simulated, rel=0.15)
