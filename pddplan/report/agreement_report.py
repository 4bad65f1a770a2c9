"""The views of `pddplan agreement`: Markdown (docs/agreement.md) and the terminal's table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from pddplan.analyses.agreement import AgreementFlags
from pddplan.report import output
from pddplan.support.loading import write_atomic


def markdown(rows: list[dict[str, Any]], requests: int) -> str:
    """The agreement table in Markdown."""
    lines = [
        "# Closed-form evaluate vs simulation",
        "",
        f"Produced by `pddplan agreement --requests {requests} --markdown docs/agreement.md`: each shipped "
        "workload's optimized plan per architecture (unverified), evaluated in closed form and simulated.",
        "Gap = (evaluate - simulate) / simulate.",
        "",
        "| workload | architecture | figure | evaluate | simulate | gap |",
        "|---|---|---|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r['workload']} | {r['architecture']} | {r['figure']} | {r['evaluate']:.4g} | {r['simulate']:.4g} | "
        f"{r['relative_gap']:+.1%} |"
        for r in rows
    )
    return "\n".join(lines) + "\n"


def table(rows: list[dict[str, Any]]) -> Table:
    """One row per (workload, architecture, figure): both figures and their relative gap."""
    out = Table(title="evaluate vs simulate")
    for header in ("workload", "architecture", "figure", "evaluate", "simulate", "gap"):
        out.add_column(header, justify="right" if header in ("evaluate", "simulate", "gap") else "left")
    for r in rows:
        out.add_row(
            r["workload"],
            r["architecture"],
            r["figure"],
            f"{r['evaluate']:.4g}",
            f"{r['simulate']:.4g}",
            f"{r['relative_gap']:+.1%}",
        )
    return out


def show(flags: AgreementFlags, rows: list[dict[str, Any]]) -> None:
    """`agreement`'s output: the Markdown file its options ask for, then JSON on stdout or the table."""
    if flags.markdown_path is not None:
        write_atomic(flags.markdown_path, markdown(rows, flags.requests))
        output.diagnostics().print(f"wrote {flags.markdown_path}", markup=False, highlight=False)
    if flags.json_out:
        output.emit_json(rows)
    else:
        output.results().print(table(rows))
