"""The views of `pddplan paper`: Markdown (examples/pdd-paper/comparison.md) and the terminal's tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from pddplan.analyses.paper import COMPARED, NOMINAL_PREMIUM, Paper, PaperFlags
from pddplan.optimize.robustness import RobustnessReport
from pddplan.report import output, robustness_report
from pddplan.support.loading import write_atomic


def markdown(result: Paper) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "# PDD article vs pddplan (workload pdd-agent-64k)",
        "",
        "Produced by `pddplan paper --markdown examples/pdd-paper/comparison.md`. Inputs are stated in "
        "workloads/pdd-agent-64k.yaml; nothing is tuned to the article.",
        "",
        "| figure | article | pddplan | why they differ |",
        "|---|---|---|---|",
    ]
    lines.extend(f"| {row.metric} | {row.article} | {row.pddplan} | {row.why} |" for row in result.rows)
    if result.robustness is not None:
        lines.extend(
            [
                "",
                "## How the decision moves",
                "",
                f"PDD against {COMPARED[0]} at GPU-B +{NOMINAL_PREMIUM:.0%}, re-optimized under each variation "
                "(`pddplan optimize --robustness`; the article's comparison is PDD against intra-datacenter PD).",
                "",
                *robustness_report.markdown(result.robustness),
            ]
        )
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, result: Paper) -> None:
    """Write the comparison atomically."""
    write_atomic(path, markdown(result))


def table(result: Paper) -> Table:
    """The comparison, one row per figure: the article's, pddplan's, and why they differ."""
    out = Table(title="PDD article vs pddplan (pdd-agent-64k)", show_lines=True)
    for header in ("figure", "article", "pddplan", "why they differ"):
        out.add_column(header)
    for row in result.rows:
        out.add_row(row.metric, row.article, row.pddplan, row.why)
    return out


def print_comparison(console: Console, result: Paper) -> None:
    """The comparison table, then how the decision moves (`robustness_report`)."""
    console.print(table(result))
    robustness_report.print_report(console, RobustnessReport.from_output(result.robustness))


def show(flags: PaperFlags, result: Paper) -> None:
    """`paper`'s output: the Markdown file its options ask for, then JSON on stdout or the tables."""
    if flags.markdown_path is not None:
        write_markdown(flags.markdown_path, result)
        output.wrote(flags.markdown_path)
    if flags.json_out:
        output.emit_json(result)
    else:
        print_comparison(output.results(), result)
