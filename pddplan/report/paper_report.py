"""The Markdown view of `pddplan paper` (examples/pdd-paper/comparison.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pddplan.analyses.paper import COMPARED, NOMINAL_PREMIUM
from pddplan.report import robustness_report
from pddplan.support.loading import write_atomic


def markdown(result: dict[str, Any]) -> str:
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
    lines.extend(f"| {row['metric']} | {row['article']} | {row['pddplan']} | {row['why']} |" for row in result["rows"])
    if "robustness" in result:
        lines.extend(
            [
                "",
                "## How the decision moves",
                "",
                f"PDD against {COMPARED[0]} at GPU-B +{NOMINAL_PREMIUM:.0%}, re-optimized under each variation "
                "(`pddplan optimize --robustness`; the article's comparison is PDD against intra-datacenter PD).",
                "",
                *robustness_report.markdown(result["robustness"]),
            ]
        )
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    """Write the comparison atomically."""
    write_atomic(path, markdown(result))
