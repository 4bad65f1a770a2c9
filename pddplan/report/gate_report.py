"""Terminal view of `pddplan gate`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pddplan.analyses.gate import ScenarioCheck

# the words of the JSON report (`verdict`), so that a reader of either sees the same verdict
STYLE = {"regression": "[red]regression[/red]", "improvement": "[green]improvement[/green]", "unchanged": "unchanged"}


def print_checks(console: Console, checks: list[ScenarioCheck]) -> None:
    """One table per scenario (its best architecture before -> after in the title; one row per
    metric: before, after, change, verdict), each narrow enough for 80 columns, then the reasons
    and one verdict line: passed, or failed naming the scenarios that regressed."""
    console.print(f"[bold]pddplan cost gate[/bold]: {len(checks)} scenarios against the baseline")
    for check in checks:
        table = Table(title=f"{check.name}: best {check.before.best or 'no plan'} -> {check.after.best or 'no plan'}")
        for header in ("metric", "before", "after", "change", "verdict"):
            table.add_column(header, justify="right" if header in ("before", "after", "change") else "left")
        for metric, m in check.metrics.items():
            table.add_row(
                metric,
                "-" if m.before is None else f"{m.before:,.4g}",
                "-" if m.after is None else f"{m.after:,.4g}",
                "-" if m.change is None else f"{m.change:+.2%}",
                STYLE[m.verdict],
            )
        console.print(table)
    for check in checks:
        for reason in check.reasons:
            console.print(f"[red]{check.name}[/red]: {reason}")
    console.print(verdict_line(checks))


def verdict_line(checks: list[ScenarioCheck]) -> str:
    """`gate passed: N scenarios, none regressed` or `gate FAILED: k of N scenarios regressed
    (names)`; the exit code says the same (1 when failed)."""
    failed = [c.name for c in checks if c.verdict == "regression"]
    if not failed:
        return f"[green]gate passed[/green]: {len(checks)} scenarios, none regressed"
    return f"[red]gate FAILED[/red]: {len(failed)} of {len(checks)} scenarios regressed ({', '.join(failed)})"


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
        for metric, m in c.metrics.items():
            before = "-" if m.before is None else f"{m.before:,.4g}"
            after = "-" if m.after is None else f"{m.after:,.4g}"
            change = "-" if m.change is None else f"{m.change:+.2%}"
            mark = {"regression": "❌ regression", "improvement": "✅ improvement", "unchanged": "= unchanged"}[
                m.verdict
            ]
            lines.append(f"| {c.name} | {metric} | {before} | {after} | {change} | {mark} |")
    reasons = [f"- **{c.name}**: {r}" for c in checks for r in c.reasons]
    if reasons:
        lines += ["", "Regressions:", *reasons]
    if any(c.verdict == "improvement" for c in checks):
        lines += ["", "Some scenarios improved: refresh the baseline with `pddplan gate BASELINE --update`."]
    return "\n".join(lines) + "\n"
