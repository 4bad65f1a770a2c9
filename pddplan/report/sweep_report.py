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


def table(param: str, points: list[dict[str, Any]], architectures: Sequence[str]) -> Table:
    """One row per value: per architecture cost and BCR (revenue per cost for a price); the best one."""
    key, label, _ = metric_for(param)
    out = Table(title=f"sweep of {param}")
    out.add_column(param, justify="right")
    for arch in architectures:
        out.add_column(f"{arch} $/h", justify="right")
        out.add_column(f"{arch} {label}", justify="right")
    out.add_column("best")
    for point in points:
        row = [f"{point['value']:g}"]
        for arch in architectures:
            entry = point.get(arch, {})
            if entry.get("feasible"):
                row += [f"{entry['cost_usd_per_hour']:,.2f}", f"{entry[key]:,.2f}"]
            else:
                row += ["-", "infeasible"]
        row.append(best_of(point, architectures) or "-")
        out.add_row(*row)
    return out


def notes(param: str, points: list[dict[str, Any]], architectures: Sequence[str]) -> list[str]:
    """Where the best architecture changes along the sweep."""
    out = []
    previous = None
    for point in points:
        best = best_of(point, architectures)
        if best != previous:
            out.append(f"from {param} = {point['value']:g}: best is {best or 'none (infeasible)'}")
            previous = best
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
    as CSV), then JSON on stdout, or the table and the chart in the terminal."""
    param, points, names = result.param, result.points, result.architectures
    drawn = chart(param, points, names)
    write_charts([drawn], f"pddplan sweep {param}", notes(param, points, names), flags.png, flags.svg, flags.html)
    if flags.csv_path is not None:
        write_atomic(flags.csv_path, csv_text(points, names))
    if flags.json_out:
        output.emit_json(result.to_dict())
        return
    console = output.results()
    console.print(table(param, points, names))
    console.print(terminal(drawn), markup=False)
