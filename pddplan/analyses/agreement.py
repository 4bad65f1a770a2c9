"""`pddplan agreement`: where the closed-form evaluator disagrees with the simulation, and by how much.

For every shipped workload (or the ones named) and architecture, the optimizer's plan (without
verification) is evaluated in closed form and simulated; the table lists both figures and their
relative gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pddplan.inputs import load_workload, workload_dir
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import optimize_each
from pddplan.simulate.summary import simulate
from pddplan.support import catalog
from pddplan.support.forking import map_forked, worker_count
from pddplan.support.outputs import Output


class AgreementRow(Output):
    workload: str
    architecture: str
    figure: str
    evaluate: float | None
    simulate: float | None
    relative_gap: float | None


FIGURES = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p90_s", "rld_token_share", "link_utilization")


@dataclass(frozen=True)
class AgreementFlags:
    """Every option of `pddplan agreement`, by the command's own parameter names."""

    requests: int = 20_000
    seed: int = 0
    workload: list[str] | None = None
    markdown_path: Path | None = None
    json_out: bool = False

    def agreement(self, progress: Callable[[str], None] | None = None) -> list[AgreementRow]:
        """The rows at these options (`agreement`)."""
        return agreement(self.requests, self.seed, progress, self.workload)


def agreement(
    requests: int = 20_000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    workloads: Sequence[str] | None = None,
) -> list[AgreementRow]:
    """Rows of (workload, architecture, figure, evaluate, simulate, relative gap), for `workloads`
    (catalog names or files; default every shipped workload). Their architectures are optimized in
    one pool of workers (`optimize_each`), and their plans simulated side by side (`map_forked`):
    the rows one by one would give."""
    names = list(dict.fromkeys(workloads)) if workloads else list(catalog.entries("workloads"))
    if progress:
        progress(f"optimizing {len(names)} workloads")
    # rows of the feasible plans only: no architecture's infeasibility explained
    options = OptimizeOptions(verify=False, diagnose=False)
    requests_of = [(load_workload(name), workload_dir(name), options) for name in names]
    reports = optimize_each(requests_of, progress=progress)
    planned = [(name, result) for name, report in zip(names, reports, strict=True) for result in report.results]
    scenarios = [result.scenario for _, result in planned if result.scenario is not None]
    if progress:
        progress(f"simulating {len(scenarios)} plans, {requests:,} requests each")
    workers = worker_count(None, len(scenarios))
    summaries = iter(map_forked(lambda scenario: simulate(scenario, requests, seed).summary, scenarios, workers))
    rows = []
    for name, result in planned:
        if result.scenario is not None:
            # the search's own closed form of the plan (`evaluate(result.scenario)`), not computed again
            assert result.evaluation is not None
            closed = result.evaluation.to_output()
            simulated = next(summaries)
            for figure in FIGURES:
                a, b = float(getattr(closed, figure)), float(getattr(simulated, figure))
                gap = (a - b) / b if b else (0.0 if a == b else float("inf"))
                rows.append(
                    AgreementRow(
                        workload=name,
                        architecture=result.name,
                        figure=figure,
                        evaluate=a,
                        simulate=b,
                        relative_gap=gap,
                    )
                )
    return rows
