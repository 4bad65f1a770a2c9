"""The commands as library calls, by file path or catalog name (what `pddplan.<name>` exposes).

    import pddplan
    report = pddplan.optimize_workload("workloads/pdd-agent-64k.yaml")
    print(report.best.architecture, report.best.evaluation.cost_per_hour)
    evaluation = pddplan.evaluate_plan("examples/plans/pdd-agent-64k-pdd.yaml", "pdd-agent-64k")

Each returns the objects the CLI renders; `.to_dict()` gives what `--json` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pddplan.evaluate.analytic import Evaluation
from pddplan.evaluate.analytic import evaluate as _evaluate
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import OptimizeReport
from pddplan.optimize.run import optimize as _optimize
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.summary import Simulation
from pddplan.simulate.summary import simulate as _simulate


def scenario_of(plan: str | Path, workload: str | Path) -> Scenario:
    """A plan file resolved against a workload (file or shipped name)."""
    inputs = load_input_set(load_workload(str(workload)), workload_dir(str(workload)))
    return build_scenario(load_plan(str(plan)), inputs, source=str(plan))


def optimize_workload(
    workload: str | Path, architectures: Sequence[str] | None = None, **options: Any
) -> OptimizeReport:
    """`pddplan optimize WORKLOAD`: `options` are `OptimizeOptions` fields (mode, rate,
    budget_per_hour, verify_requests, seed, verify, early_stop, jobs, ...)."""
    return _optimize(
        load_workload(str(workload)), workload_dir(str(workload)), OptimizeOptions(**options), architectures
    )


def evaluate_plan(plan: str | Path, workload: str | Path, rate_rps: float | None = None) -> Evaluation:
    """`pddplan evaluate PLAN WORKLOAD`: the closed-form figures."""
    return _evaluate(scenario_of(plan, workload), rate_rps)


def simulate_plan(plan: str | Path, workload: str | Path, requests: int = 20_000, seed: int = 0) -> Simulation:
    """`pddplan simulate PLAN WORKLOAD`: the request-level simulation (`.summary` is its JSON)."""
    return _simulate(scenario_of(plan, workload), requests, seed)
