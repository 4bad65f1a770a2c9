"""Assemble the HTML plan report of one plan (`--report FILE` on optimize, evaluate and simulate):
its figures, a simulation for the TTFT and TPOT distributions (the command's own when it ran one),
the sensitivity curves and the inputs, rendered by `pddplan.report.plan_html`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pddplan.analyses.sensitivity import sensitivity
from pddplan.errors import InputError
from pddplan.evaluate.outputs import Figures
from pddplan.inputs.input_set import InputSet
from pddplan.inputs.plan_files import plan_yaml
from pddplan.optimize.run import OptimizeReport
from pddplan.report.optimize_report import figures_of, verdict_lines
from pddplan.report.plan_html import OtherPlan, PlanReport, plan_report_html
from pddplan.scenarios.scenario import Scenario
from pddplan.simulate.engine import RequestTable, simulate_requests
from pddplan.simulate.summary import WARMUP_FRACTION

REPORT_REQUESTS = 10_000


def check_report_path(path: Path) -> None:
    """InputError unless `path` names an .html file (checked before any work)."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--report = {str(path)!r}: the report is an HTML page; name it .html")


@dataclass(frozen=True)
class Comparison:
    """What optimize's report shows beside its plan: every architecture's figures, the verdict in
    words, and each other feasible architecture's name, scenario and WAN utilization."""

    architectures: list[dict[str, Any]]
    verdict: list[str]
    others: list[tuple[str, Scenario, float]]


def comparison_of(report: OptimizeReport) -> Comparison:
    """Optimize's `Comparison`: the architectures side by side (`figures_of`), the
    verdict (`verdict_lines`) and the feasible architectures other than the best (closed-form WAN
    utilization)."""
    best = report.best
    others = [
        (r.name, r.scenario, r.evaluation.link_utilization)
        for r in report.feasible
        if r is not best and r.scenario is not None and r.evaluation is not None
    ]
    return Comparison([figures_of(r) for r in report.results], verdict_lines(report), others)


def plan_report(
    scenario: Scenario,
    inputs: InputSet,
    figures: Figures,
    figures_source: str,
    simulation: tuple[RequestTable, str] | None = None,
    comparison: Comparison | None = None,
    seed: int = 0,
) -> str:
    """The report page of `scenario`'s plan. Without the command's own simulation (`simulation`:
    its request table and a line saying what it was), one of REPORT_REQUESTS requests with `seed`
    is run for the distributions; the warm-up is left out. With optimize's `comparison`, the other
    architectures' plans are simulated alike for their TTFT."""
    if simulation is None:
        table, _ = simulate_requests(scenario, REPORT_REQUESTS, seed)
        simulation_source = f"simulated, {REPORT_REQUESTS:,} requests, seed {seed}"
    else:
        table, simulation_source = simulation
    keep = np.arange(len(table.arrival_s)) >= int(len(table.arrival_s) * WARMUP_FRACTION)
    workload = scenario.workload
    report = PlanReport(
        title=f"pddplan: {scenario.plan.name} ({scenario.plan.architecture}) for {workload.name}",
        scenario=scenario,
        figures=figures.json_data(),
        figures_source=figures_source,
        ttft_s=table.ttft_s[keep],
        tpot_s=table.tpot_s[keep],
        simulation_source=simulation_source,
        sensitivity=sensitivity(scenario, inputs),
        inputs={
            "plan": plan_yaml(scenario.plan, workload.name),
            f"workload {workload.name}": yaml.safe_dump(
                workload.model_dump(mode="json", exclude_none=True), sort_keys=False
            ),
        },
        pipelines=table.pipeline[keep],
    )
    if comparison is not None:
        others = [OtherPlan(name, plan, used, _ttft_after_warmup(plan, seed)) for name, plan, used in comparison.others]
        report = replace(report, architectures=comparison.architectures, verdict=comparison.verdict, others=others)
    return plan_report_html(report)


def _ttft_after_warmup(scenario: Scenario, seed: int) -> np.ndarray:
    """TTFT of REPORT_REQUESTS simulated requests with `seed`, the warm-up left out."""
    table, _ = simulate_requests(scenario, REPORT_REQUESTS, seed)
    return table.ttft_s[int(len(table.ttft_s) * WARMUP_FRACTION) :]
