"""Terminal view of `pddplan gate`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pddplan.analyses.gate import ScenarioCheck

# the words of the JSON report (`verdict`), so that a reader of either sees the same verdict
STYLE = {"regression": "[red]regression[/red]", "improvement": "[green]improvement[/green]", "unchanged": "unchanged"}


def print_checks(console: Console, checks: list[ScenarioCheck]) -> None:
    """One row per scenario and metric: before, after, change, verdict."""
    table = Table(title="pddplan cost gate")
    for header in ("scenario", "best before -> after", "metric", "before", "after", "change", "verdict"):
        table.add_column(header, justify="right" if header in ("before", "after", "change") else "left")
    for check in checks:
        for i, m in enumerate(check.metrics):
            table.add_row(
                check.name if i == 0 else "",
                f"{check.before.best} -> {check.after.best}" if i == 0 else "",
                m.metric,
                "-" if m.before is None else f"{m.before:,.4g}",
                "-" if m.after is None else f"{m.after:,.4g}",
                "-" if m.change is None else f"{m.change:+.2%}",
                STYLE[m.verdict],
            )
    console.print(table)
    for check in checks:
        for reason in check.reasons:
            console.print(f"[red]{check.name}[/red]: {reason}")


def markdown(checks: list[ScenarioCheck]) -> str:
    """A pull-request comment: one table row per scenario and metric."""
    passed = all(c.verdict != "regression" for c in checks)
    lines = [
        "## pddplan cost gate: " + ("passed" if passed else "**failed**"),
        "",
        "| scenario | metric | before | after | change | verdict |",
        "|---|---|---:|---:|---:|---|",
    ]
    for c in checks:
        for m in c.metrics:
            before = "-" if m.before is None else f"{m.before:,.4g}"
            after = "-" if m.after is None else f"{m.after:,.4g}"
            change = "-" if m.change is None else f"{m.change:+.2%}"
            mark = {"regression": "❌ regression", "improvement": "✅ improvement", "unchanged": "= unchanged"}[
                m.verdict
            ]
            lines.append(f"| {c.name} | {m.metric} | {before} | {after} | {change} | {mark} |")
    reasons = [f"- **{c.name}**: {r}" for c in checks for r in c.reasons]
    if reasons:
        lines += ["", "Regressions:", *reasons]
    if any(c.verdict == "improvement" for c in checks):
        lines += ["", "Some scenarios improved: refresh the baseline with `pddplan gate BASELINE --update`."]
    return "\n".join(lines) + "\n"
