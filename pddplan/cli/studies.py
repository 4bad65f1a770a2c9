"""`pddplan bathtub`, `sweep`, `paper`, `agreement`: one input moved across a range, the article,
the two models side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import (
    ArchitectureOption,
    BackendOption,
    DetailFlag,
    JobsOption,
    JsonFlag,
    SchedulerOption,
)

if TYPE_CHECKING:
    pass


# -- curves: the files they write -----------------------------------------------------------------
PngOption = Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")]
SvgOption = Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")]
HtmlOption = Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")]
CsvOption = Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")]


# -- bathtub --------------------------------------------------------------------------------------
BathtubWorkloadArg = Annotated[str, typer.Argument(help="Workload name or YAML file.")]
ModeOption = Annotated[
    str, typer.Option("--mode", help="fixed: every request at the hit rate; shift: move the whole distribution.")
]
PointsOption = Annotated[int, typer.Option("--points", help="Hit rates from 0 to 100%.")]
ChunkOption = Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill size (default: the workload's).")]
FixedPlanOption = Annotated[
    bool,
    typer.Option(
        "--fixed-plan/--resize",
        help="Keep each plan as sized at the workload's own hit rate, only the hit rate moves (default); "
        "or re-size it at every hit rate.",
    ),
]
BathtubTraceOption = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="A request trace (Mooncake JSON lines): mark the hit its traffic reaches at each cache size, "
        "and the cache that climbs out of a valley.",
    ),
]


@app.command("bathtub")
def bathtub(
    workload: BathtubWorkloadArg = "pdd-agent-64k",
    mode: ModeOption = "fixed",
    points: PointsOption = 101,
    chunk: ChunkOption = None,
    fixed_plan: FixedPlanOption = True,
    architecture: ArchitectureOption = None,
    trace: BathtubTraceOption = None,
    png: PngOption = None,
    svg: SvgOption = None,
    html: HtmlOption = None,
    csv_path: CsvOption = None,
    jobs: JobsOption = None,
    backend: BackendOption = "fork",
    scheduler: SchedulerOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Benefit against prefix-hit rate per architecture (the bathtub), with its valley, tail-chunk
    dips, crossovers and what it takes to climb out."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses import bathtub as tub
    from pddplan.report import bathtub_report, output

    flags = tub.BathtubFlags(**given)
    request = flags.request()  # every check before the progress bar starts
    with output.progress_bar() as progress:
        task = progress.add_task("hit-rate sweep", total=points)
        result = tub.run_request(
            request, progress=lambda done, total: progress.update(task, completed=done, refresh=True)
        )
    outcome = tub.BathtubOutcome(result)
    if trace is not None:
        with output.status(f"replaying {trace} at each cache size..."):
            outcome = tub.mark_trace(request, result)
    bathtub_report.show(flags, outcome)


# -- sweep ----------------------------------------------------------------------------------------
SweepWorkloadArg = Annotated[str, typer.Argument(help="Workload name or YAML file.")]
ParamOption = Annotated[str, typer.Option("--param", help="Field path, e.g. deployment.wan_lines[0].capacity_gbps.")]
ValuesOption = Annotated[str | None, typer.Option("--values", help="Comma-separated values.")]
RangeOption = Annotated[str | None, typer.Option("--range", help="START:STOP:NUM evenly spaced values.")]
ExactOption = Annotated[
    bool,
    typer.Option(
        "--optimize",
        help="Run the integer program at each point (slower); figures are then the plan's goodput "
        "at the offered rate, not its fluid capacity.",
    ),
]


@app.command("sweep")
def sweep(
    workload: SweepWorkloadArg,
    param: ParamOption,
    values: ValuesOption = None,
    span: RangeOption = None,
    architecture: ArchitectureOption = None,
    jobs: JobsOption = None,
    backend: BackendOption = "fork",
    scheduler: SchedulerOption = None,
    exact: ExactOption = False,
    png: PngOption = None,
    svg: SvgOption = None,
    html: HtmlOption = None,
    csv_path: CsvOption = None,
    detail: DetailFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Cost, BCR and GPUs of each architecture as one numeric input of the workload varies."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses import sweep as sweeping
    from pddplan.report import output, sweep_report

    flags = sweeping.SweepFlags(**given)
    request = flags.request()  # every check before the progress bar starts
    with output.progress_bar() as progress:
        task = progress.add_task(f"sweeping {param}", total=len(request.values))
        result = sweeping.run_request(
            request, progress=lambda done, total: progress.update(task, completed=done, refresh=True)
        )
    sweep_report.show(flags, result)


# -- the article, and the two models side by side --------------------------------------------------
RequestsOption = Annotated[int, typer.Option("--requests", help="Requests simulated per plan.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the simulations.")]
MarkdownOption = Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")]


@app.command("paper")
def paper(
    requests: RequestsOption = 20_000,
    seed: SeedOption = 0,
    markdown_path: MarkdownOption = None,
    json_out: JsonFlag = False,
) -> None:
    """The PDD article's figures next to pddplan's for its scenario, with why each differs."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses import paper as comparison
    from pddplan.report import output, paper_report

    flags = comparison.PaperFlags(**given)
    with output.status("running the paper scenario...") as status:
        result = flags.compare(progress=status.update)
    paper_report.show(flags, result)


AgreementWorkloadOption = Annotated[
    list[str] | None,
    typer.Option(
        "--workload", "-w", help="A workload to compare, by name or file (repeatable); default: every shipped one."
    ),
]


@app.command("agreement")
def agreement(
    requests: RequestsOption = 20_000,
    seed: SeedOption = 0,
    workload: AgreementWorkloadOption = None,
    markdown_path: MarkdownOption = None,
    detail: DetailFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Where the closed-form evaluator and the simulation disagree on the shipped workloads."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses import agreement as check
    from pddplan.report import agreement_report, output

    given.pop("detail")  # how the table shows, not what is computed
    flags = check.AgreementFlags(**given)
    with output.status("comparing...") as status:
        rows = flags.agreement(progress=status.update)
    agreement_report.show(flags, rows, detail)
