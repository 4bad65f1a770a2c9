"""`pddplan agreement`: where the closed-form evaluator disagrees with the simulation, and by how much.

For every shipped workload and architecture, the optimizer's plan (without verification) is
evaluated in closed form and simulated; the table lists both figures and their relative gap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddplan.evaluate.analytic import evaluate
from pddplan.inputs import load_workload, workload_dir
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import optimize
from pddplan.simulate.summary import simulate
from pddplan.support import catalog
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
    markdown_path: Path | None = None
    json_out: bool = False

    def agreement(self, progress: Callable[[str], None] | None = None) -> list[AgreementRow]:
        """The rows at these options (`agreement`)."""
        return agreement(self.requests, self.seed, progress)


def agreement(
    requests: int = 20_000, seed: int = 0, progress: Callable[[str], None] | None = None
) -> list[AgreementRow]:
    """Rows of (workload, architecture, figure, evaluate, simulate, relative gap)."""
    rows = []
    for name in catalog.entries("workloads"):
        workload = load_workload(name)
        base = workload_dir(name)
        if progress:
            progress(f"{name}: optimizing")
        report = optimize(workload, base, OptimizeOptions(verify=False))
        for result in report.results:
            if result.scenario is None:
                continue
            if progress:
                progress(f"{name}: simulating {result.name}")
            closed = evaluate(result.scenario).to_output()
            simulated = simulate(result.scenario, requests, seed).summary
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
