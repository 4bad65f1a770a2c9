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
    JobsOption,
    JsonFlag,
    SchedulerOption,
    _architecture_names,
    _check_image_outputs,
    _write_charts,
)

if TYPE_CHECKING:
    pass


@app.command("bathtub")
def bathtub(
    workload: Annotated[str, typer.Argument(help="Workload name or YAML file.")] = "pdd-agent-64k",
    mode: Annotated[
        str, typer.Option("--mode", help="fixed: every request at the hit rate; shift: move the whole distribution.")
    ] = "fixed",
    points: Annotated[int, typer.Option("--points", help="Hit rates from 0 to 100%.")] = 101,
    chunk: Annotated[
        int | None, typer.Option("--chunk", help="Chunked-prefill size (default: the workload's).")
    ] = None,
    fixed_plan: Annotated[
        bool,
        typer.Option(
            "--fixed-plan/--resize",
            help="Keep each plan as sized at the workload's own hit rate, only the hit rate moves (default); "
            "or re-size it at every hit rate.",
        ),
    ] = True,
    architecture: ArchitectureOption = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="A request trace (Mooncake JSON lines): mark the hit its traffic reaches at each cache size, "
            "and the cache that climbs out of a valley.",
        ),
    ] = None,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")] = None,
    jobs: JobsOption = 1,
    backend: BackendOption = "loky",
    scheduler: SchedulerOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Benefit against prefix-hit rate per architecture (the bathtub), with its valley, tail-chunk
    dips, crossovers and what it takes to climb out."""
    from pddplan.analyses import bathtub as tub
    from pddplan.errors import InputError
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.report import bathtub_report, output
    from pddplan.report.charts import terminal
    from pddplan.support.distribute import Execution
    from pddplan.support.loading import write_atomic

    if mode not in ("fixed", "shift"):
        raise InputError(f"--mode = {mode!r}: expected fixed or shift")
    from pddplan.support.limits import check_points

    check_points(points)  # before the progress bar starts
    _check_image_outputs(png, svg)
    names = _architecture_names(architecture)
    spec = load_workload(workload)
    console = output.results()

    with output.progress_bar() as progress:
        task = progress.add_task("hit-rate sweep", total=points)
        options = tub.BathtubOptions(
            mode,  # type: ignore[arg-type]
            points,
            chunk,
            fixed_plan,
            Execution(jobs, backend, False, scheduler),
        )
        result = tub.bathtub(
            spec,
            workload_dir(workload),
            names,
            options,
            progress=lambda done, total: progress.update(task, completed=done),
        )
    charts = bathtub_report.charts(result)
    notes = bathtub_report.findings_text(result)
    marks = None
    if trace is not None:
        from pddplan.inputs import load_model
        from pddplan.perf.kv import kv_bytes_per_token
        from pddplan.trace.bathtub_marks import marks_text, trace_marks

        with output.status(f"replaying {trace} at each cache size..."):
            kv = kv_bytes_per_token(load_model(spec.model, spec.kv_dtype))
            marks = trace_marks(result.findings, trace, "mooncake", kv)
        notes += marks_text(marks, spec.hit_rate.mean())
    _write_charts(charts, f"pddplan bathtub: {spec.name}", notes, png, svg, html)
    if csv_path is not None:
        write_atomic(csv_path, bathtub_report.csv_text(result))
    if json_out:
        output.emit_json(result.to_dict() | ({"trace": marks} if marks is not None else {}))
        return
    for chart in charts:
        console.print(terminal(chart), markup=False)
        console.print()
    for note in notes:
        console.print(f"- {note}", markup=False)


@app.command("sweep")
def sweep(
    workload: Annotated[str, typer.Argument(help="Workload name or YAML file.")],
    param: Annotated[str, typer.Option("--param", help="Field path, e.g. deployment.wan_lines[0].capacity_gbps.")],
    values: Annotated[str | None, typer.Option("--values", help="Comma-separated values.")] = None,
    span: Annotated[str | None, typer.Option("--range", help="START:STOP:NUM evenly spaced values.")] = None,
    architecture: ArchitectureOption = None,
    jobs: JobsOption = 1,
    backend: BackendOption = "loky",
    scheduler: SchedulerOption = None,
    exact: Annotated[
        bool,
        typer.Option(
            "--optimize",
            help="Run the integer program at each point (slower); figures are then the plan's goodput "
            "at the offered rate, not its fluid capacity.",
        ),
    ] = False,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Cost, BCR and GPUs of each architecture as one numeric input of the workload varies."""

    from pddplan.analyses import sweep as sweeping
    from pddplan.report import output, sweep_report
    from pddplan.report.charts import terminal
    from pddplan.support import catalog
    from pddplan.support.distribute import Execution
    from pddplan.support.limits import check_jobs
    from pddplan.support.loading import write_atomic

    names = _architecture_names(architecture)
    check_jobs(jobs)
    _check_image_outputs(png, svg)
    points_values = sweeping.parse_values(values, span)
    path = catalog.resolve("workloads", workload, "workload")
    console = output.results()
    with output.progress_bar() as progress:
        task = progress.add_task(f"sweeping {param}", total=len(points_values))
        points = sweeping.sweep(
            path,
            param,
            points_values,
            names,
            Execution(jobs, backend, exact, scheduler),
            progress=lambda done, total: progress.update(task, completed=done),
        )
    chart = sweep_report.chart(param, points, names)
    _write_charts([chart], f"pddplan sweep {param}", sweep_report.notes(param, points, names), png, svg, html)
    if csv_path is not None:
        write_atomic(csv_path, sweep_report.csv_text(points, names))
    if json_out:
        output.emit_json({"workload": workload, "param": param, "architectures": names, "points": points})
        return
    console.print(sweep_report.table(param, points, names))
    console.print(terminal(chart), markup=False)


@app.command("paper")
def paper(
    requests: Annotated[int, typer.Option("--requests", help="Requests simulated per plan.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulations.")] = 0,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """The PDD article's figures next to pddplan's for its scenario, with why each differs."""
    from rich.table import Table

    from pddplan.analyses import paper as comparison
    from pddplan.errors import InputError
    from pddplan.report import output

    if requests < 1000:
        raise InputError(f"--requests = {requests}: use at least 1000 for stable tails")
    console = output.results()
    with output.status("running the paper scenario...") as status:
        result = comparison.compare(requests, seed, progress=lambda text: status.update(text))
    if markdown_path is not None:
        from pddplan.report.paper_report import write_markdown

        write_markdown(markdown_path, result)
    if json_out:
        output.emit_json(result)
        return
    table = Table(title="PDD article vs pddplan (pdd-agent-64k)", show_lines=True)
    for header in ("figure", "article", "pddplan", "why they differ"):
        table.add_column(header)
    for row in result["rows"]:
        table.add_row(row["metric"], row["article"], row["pddplan"], row["why"])
    console.print(table)
    from pddplan.optimize.robustness import RobustnessReport
    from pddplan.report import robustness_report

    robustness_report.print_report(console, RobustnessReport.from_dict(result["robustness"]))


@app.command("agreement")
def agreement(
    requests: Annotated[int, typer.Option("--requests", help="Requests simulated per plan.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulations.")] = 0,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Where the closed-form evaluator and the simulation disagree on the shipped workloads."""
    from rich.table import Table

    from pddplan.analyses import agreement as check
    from pddplan.report import output
    from pddplan.support.loading import write_atomic

    console = output.results()
    with output.status("comparing...") as status:
        rows = check.agreement(requests, seed, progress=lambda text: status.update(text))
    if markdown_path is not None:
        from pddplan.report.agreement_report import markdown as agreement_markdown

        write_atomic(markdown_path, agreement_markdown(rows, requests))
    if json_out:
        output.emit_json(rows)
        return
    table = Table(title="evaluate vs simulate")
    for header in ("workload", "architecture", "figure", "evaluate", "simulate", "gap"):
        table.add_column(header, justify="right" if header in ("evaluate", "simulate", "gap") else "left")
    for r in rows:
        table.add_row(
            r["workload"],
            r["architecture"],
            r["figure"],
            f"{r['evaluate']:.4g}",
            f"{r['simulate']:.4g}",
            f"{r['relative_gap']:+.1%}",
        )
    console.print(table)
