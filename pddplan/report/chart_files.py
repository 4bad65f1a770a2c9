"""The chart files a curve command (`bathtub`, `sweep`) writes besides its output: a
self-contained HTML page, a PNG and an SVG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pddplan.report import charts as drawing
from pddplan.report.output import wrote
from pddplan.support.loading import write_atomic, write_atomic_bytes


def write_charts(
    charts: Sequence[drawing.Chart],
    title: str,
    notes: list[str],
    png: Path | None,
    svg: Path | None,
    html: Path | None,
) -> None:
    """Write the charts to each file asked for (None: not written), the HTML page first, with the
    notes under the charts; each file written is noticed on stderr."""
    if html is not None:
        write_atomic(html, drawing.html_page(title, charts, notes))
        wrote(html)
    if png is not None:
        write_atomic_bytes(png, drawing.image(charts, title, "png"))
        wrote(png)
    if svg is not None:
        write_atomic_bytes(svg, drawing.image(charts, title, "svg"))
        wrote(svg)
