"""The terminal and Markdown views of `optimize --robustness`: the decision per variation, then the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pddplan.optimize.outputs import Robustness, RobustnessRow
from pddplan.optimize.robustness import RobustnessReport

HEADERS = ("variation", "best", "PDD $/h", "best baseline", "PDD vs best baseline")


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def cells(row: RobustnessRow) -> tuple[str, str, str, str, str]:
    """One row's cells, as both views print them."""
    baseline = (
        f"{row.best_baseline} {_money(row.best_baseline_cost_usd_per_hour)}" if row.best_baseline else "none feasible"
    )
    subject = _money(row.subject_cost_usd_per_hour) if row.subject_feasible else "infeasible"
    change = f"{row.cost_change_vs_best_baseline:+.1%}" if row.cost_change_vs_best_baseline is not None else "-"
    return (row.variation, row.best or "none", subject, baseline, change)


def table(report: RobustnessReport) -> Table:
    """The decision under each variation (fits 80 columns: names and figures are never cut)."""
    out = Table(title="how the decision moves (re-optimized per variation)", show_edge=False)
    for header in HEADERS:
        out.add_column(header, justify="left" if header in ("variation", "best", "best baseline") else "right")
    for row in report.rows:
        out.add_row(*cells(row))
    return out


def print_report(console: Console, report: RobustnessReport) -> None:
    """The table, the verdict and the notes on variations skipped."""
    console.print(table(report))
    console.print(report.verdict, markup=False)
    for reason in report.reasons:
        console.print(f"- {reason}", markup=False)
    for note in report.notes:
        console.print(note, markup=False)


def markdown(report: Robustness) -> list[str]:
    """A report's typed result (`RobustnessReport.to_output()`) as Markdown lines."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|---|---|---:|---|---:|"]
    lines.extend("| " + " | ".join(cells(row)) + " |" for row in report.rows)
    lines.extend(["", f"{report.verdict}."])
    lines.extend(f"- {reason}" for reason in report.reasons)
    lines.extend(f"{note}." for note in report.notes)
    return lines
