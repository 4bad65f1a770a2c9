"""`pddplan evaluate` as one library call: every option by the command's own parameter name, the
scenario they name (the plan on its workload, or on a trace's traffic), and its figures.

    flags = EvaluateFlags("examples/plans/pdd-agent-64k-pdd.yaml", "pdd-agent-64k", rate=4.0)
    scenario, figures = flags.evaluate()

Every check is here, so a library caller gets the errors the command line gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddplan.errors import InputError
from pddplan.evaluate import outputs
from pddplan.evaluate.analytic import evaluate
from pddplan.evaluate.capacity_view import capacity_view
from pddplan.scenarios.files import plan_scenario
from pddplan.scenarios.scenario import Scenario
from pddplan.support.limits import check_rate
from pddplan.trace.workload import traced_scenario


@dataclass(frozen=True)
class EvaluateFlags:
    """Every option of `pddplan evaluate`, by the command's parameter names; the rate is checked
    when the flags are made, the rest when the scenario is built."""

    plan: str
    workload: str
    rate: float | None = None
    trace: Path | None = None
    trace_format: str = "mooncake"
    cache_capacity: str | None = None
    report: Path | None = None
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for a rate out of bounds, before any file is read."""
        if self.rate is not None:
            check_rate(self.rate)

    def scenario(self, progress: Callable[[str], None] | None = None) -> Scenario:
        """The plan on the workload or, with a trace, on the trace's traffic (`traced_scenario`,
        hits through the `cache_capacity` cache); InputError for a cache capacity without a trace."""
        if self.trace is not None:
            return traced_scenario(
                self.plan, self.workload, self.trace, self.trace_format, self.cache_capacity, progress
            )
        if self.cache_capacity is not None:
            raise InputError("--cache-capacity goes with --trace")
        return plan_scenario(self.plan, self.workload)

    def evaluate(self, progress: Callable[[str], None] | None = None) -> tuple[Scenario, outputs.Evaluation]:
        """The scenario and its closed-form figures at the rate (default: the plan's), with its
        capacity view under "capacity": what `--json` prints."""
        scenario = self.scenario(progress)
        return scenario, evaluate(scenario, self.rate).to_output(capacity_view(scenario).to_output())
