"""The views of `pddplan agreement`: Markdown (docs/agreement.md) and the terminal's table."""

from __future__ import annotations

from rich.table import Table

from pddplan.analyses.agreement import AgreementFlags, AgreementRow
from pddplan.report import output
from pddplan.support.loading import write_atomic


def markdown(rows: list[AgreementRow], requests: int) -> str:
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
        f"| {r.workload} | {r.architecture} | {r.figure} | {r.evaluate:.4g} | {r.simulate:.4g} | "
        f"{r.relative_gap:+.1%} |"
        for r in rows
    )
    return "\n".join(lines) + "\n"


def table(rows: list[AgreementRow]) -> Table:
    """One row per (workload, architecture, figure): both figures and their relative gap."""
    out = Table(title="evaluate vs simulate")
    for header in ("workload", "architecture", "figure", "evaluate", "simulate", "gap"):
        out.add_column(header, justify="right" if header in ("evaluate", "simulate", "gap") else "left")
    for r in rows:
        out.add_row(
            r.workload,
            r.architecture,
            r.figure,
            f"{r.evaluate:.4g}",
            f"{r.simulate:.4g}",
            f"{r.relative_gap:+.1%}",
        )
    return out


def gaps_table(rows: list[AgreementRow]) -> Table:
    """The summary: one row per (workload, architecture), the relative gap of each figure in a
    column of its own (the figures in the order the rows give them)."""
    figures = list(dict.fromkeys(r.figure for r in rows))
    out = Table(title="evaluate vs simulate: gap = (evaluate - simulate) / simulate")
    out.add_column("workload")
    out.add_column("architecture")
    for figure in figures:
        out.add_column(figure_label(figure), justify="right")
    gaps: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        gaps.setdefault((r.workload, r.architecture), {})[r.figure] = f"{r.relative_gap:+.1%}"
    for (workload, architecture), by_figure in gaps.items():
        out.add_row(workload, architecture, *(by_figure.get(figure, "-") for figure in figures))
    return out


def figure_label(figure: str) -> str:
    """A figure's key as a column header, words apart so it may wrap: `ttft_p90_s` -> `TTFT P90`,
    `link_utilization` -> `link utilization`."""
    words = figure.removesuffix("_s").split("_")
    if words[0] in ("ttft", "tpot"):
        return " ".join(word.upper() for word in words)
    return " ".join(words)


#: the gaps a terminal too narrow for every figure keeps: the latencies the SLA names
KEY_COLUMNS = ("workload", "architecture", "TTFT P50", "TTFT P90", "TTFT P99", "TPOT P90")


def show(flags: AgreementFlags, rows: list[AgreementRow], detail: bool = False) -> None:
    """`agreement`'s output: the Markdown file its options ask for, then JSON on stdout, or the
    gaps one row per workload and architecture (the columns that fit the terminal), or with
    `detail` every figure's evaluate and simulate values, one row each."""
    if flags.markdown_path is not None:
        write_atomic(flags.markdown_path, markdown(rows, flags.requests))
        output.wrote(flags.markdown_path)
    if flags.json_out:
        output.emit_json(rows)
        return
    console = output.results()
    if detail:
        console.print(table(rows))
        return
    console.print(output.key_columns(console, gaps_table(rows), KEY_COLUMNS))
    console.print("--detail shows each figure's evaluate and simulate values.")
