"""Views of a parameter sweep: table, chart, notes, CSV, and `pddplan sweep`'s output."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.table import Table

from pddplan.analyses.sweep import SweepFlags, SweepResult, best_of
from pddplan.report import output
from pddplan.report.chart_files import write_charts
from pddplan.report.charts import Chart, Series, terminal
from pddplan.support.loading import write_atomic


def _value(point: dict[str, Any], arch: str, key: str) -> float:
    entry = point.get(arch, {})
    return float(entry[key]) if entry.get("feasible") else float("nan")


def metric_for(param: str) -> tuple[str, str, str]:
    """(key, column label, axis label) of what a sweep of `param` shows: a token price moves
    revenue, not cost or requests per dollar, so a price sweep shows revenue per dollar of cost;
    every other parameter shows BCR (requests per dollar)."""
    if param.startswith("prices."):
        return "revenue_per_cost", "rev/cost", "revenue $ per $ of cost"
    return "bcr", "BCR", "requests per $"


def chart(param: str, points: list[dict[str, Any]], architectures: Sequence[str]) -> Chart:
    """BCR (revenue per cost for a price) of each architecture's plan against the parameter."""
    key, label, axis = metric_for(param)
    x = np.array([p["value"] for p in points], dtype=np.float64)
    return Chart(
        title=f"{label} vs {param}",
        x=x,
        series=[Series(a, np.array([_value(p, a, key) for p in points])) for a in architectures],
        x_label=param,
        y_label=axis,
    )


#: what a '-' in the table means: without --optimize each architecture gets one plan, from greedy
#: sizing, and that plan failing says nothing of the plans a search would find
NO_PLAN = {
    False: "-: the architecture's greedy-sized plan fails here (one plan evaluated, not a search: "
    "--optimize may find one)",
    True: "-: infeasible (the integer program finds no plan of this architecture within the SLA and the offers)",
}


def table(param: str, points: list[dict[str, Any]], architectures: Sequence[str], optimized: bool = False) -> Table:
    """One row per value: per architecture cost and BCR (revenue per cost for a price), `-` where it
    has no plan (the caption says what that means, `NO_PLAN`); the best one. The first column is
    headed by the field's own name, the title carries its whole path."""
    key, label, _ = metric_for(param)
    out = Table(title=f"sweep of {param}")
    out.add_column(param_label(param), justify="right")
    for arch in architectures:
        out.add_column(f"{arch} $/h", justify="right")
        out.add_column(f"{arch} {label}", justify="right")
    out.add_column("best")
    for point in points:
        row = [f"{point['value']:g}"]
        for arch in architectures:
            entry = point.get(arch, {})
            row += [f"{entry['cost_usd_per_hour']:,.2f}", f"{entry[key]:,.2f}"] if entry.get("feasible") else ["-", "-"]
        row.append(best_of(point, architectures) or "-")
        out.add_row(*row)
    if any(not point.get(arch, {}).get("feasible") for point in points for arch in architectures):
        out.caption = NO_PLAN[optimized]
        out.caption_justify = "left"
    return out


def param_label(param: str) -> str:
    """The swept field's own name, words apart (`deployment.wan_lines[0].capacity_gbps` ->
    `capacity gbps`), so the column stays narrow and its header may wrap."""
    return param.rsplit(".", 1)[-1].replace("_", " ")


def key_columns(param: str, architectures: Sequence[str]) -> list[str]:
    """The columns a terminal too narrow for the whole table keeps: the value, each architecture's
    BCR (revenue per cost for a price), the best one."""
    _, label, _ = metric_for(param)
    return [param_label(param), *(f"{arch} {label}" for arch in architectures), "best"]


def notes(param: str, points: list[dict[str, Any]], architectures: Sequence[str], optimized: bool = False) -> list[str]:
    """The best architecture at the first value and wherever it changes along the sweep."""
    none = "none (infeasible)" if optimized else "none (no greedy-sized plan meets the SLA; try --optimize)"
    out = []
    for index, point in enumerate(points):
        best = best_of(point, architectures)
        if index == 0 or best != best_of(points[index - 1], architectures):
            out.append(f"from {param} = {point['value']:g}: best is {best or none}")
    return out


def csv_text(points: list[dict[str, Any]], architectures: Sequence[str]) -> str:
    """One row per value: per architecture feasibility, cost, BCR, throughput per GPU-hour."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    keys = (
        "feasible",
        "cost_usd_per_hour",
        "bcr",
        "throughput_per_gpu_hour",
        "fluid_revenue_per_cost",
        "revenue_per_cost",
        "wan_gbps",
    )
    writer.writerow(["value", *[f"{a}.{k}" for a in architectures for k in keys]])
    for point in points:
        row: list[Any] = [point["value"]]
        for arch in architectures:
            entry = point.get(arch, {})
            row += [entry.get(k, "") for k in keys]
        writer.writerow(row)
    return buffer.getvalue()


def show(flags: SweepFlags, result: SweepResult) -> None:
    """`sweep`'s output: the files its options ask for (the chart as HTML, PNG and SVG, the points
    as CSV), then JSON on stdout, or the table (its key columns when the whole does not fit the
    terminal and `--detail` is not given) and the chart in the terminal."""
    param, points, names, optimized = result.param, result.points, result.architectures, flags.exact
    drawn = chart(param, points, names)
    found = notes(param, points, names, optimized)
    write_charts([drawn], f"pddplan sweep {param}", found, flags.png, flags.svg, flags.html)
    if flags.csv_path is not None:
        write_atomic(flags.csv_path, csv_text(points, names))
        output.wrote(flags.csv_path)
    if result.unused is not None:
        output.diagnostics().print(f"warning: {result.unused}", markup=False, highlight=False)
    if flags.json_out:
        output.emit_json(result.to_output())
        return
    console = output.results()
    whole = table(param, points, names, optimized)
    console.print(whole if flags.detail else output.key_columns(console, whole, key_columns(param, names)))
    console.print(terminal(drawn), markup=False)
