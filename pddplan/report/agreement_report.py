"""The Markdown view of `pddplan agreement` (docs/agreement.md)."""

from __future__ import annotations

from typing import Any


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
