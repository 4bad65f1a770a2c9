"""Line charts of curves (hit-rate sweeps, parameter sweeps): in the terminal, as SVG/HTML, as PNG.

The terminal and HTML charts need nothing beyond the standard library; PNG and SVG files come from
matplotlib, an optional extra (`pip install 'pddplan[plot]'`).
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pddplan.errors import InputError
from pddplan.support.images import require_image_support as require_image_support  # re-exported

MARKERS = ("o", "x", "*", "+", "#", "@")
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass(frozen=True)
class Series:
    """One line: a name and y values (nan = no value at that x)."""

    name: str
    values: np.ndarray


@dataclass(frozen=True)
class Chart:
    """A chart: x values, lines, labels, and vertical markers (x, label)."""

    title: str
    x: np.ndarray
    series: list[Series]
    x_label: str
    y_label: str
    markers: list[tuple[float, str]] = field(default_factory=list)
    x_percent: bool = False


def _range(chart: Chart) -> tuple[float, float]:
    values = np.concatenate([s.values[np.isfinite(s.values)] for s in chart.series] or [np.array([0.0])])
    if values.size == 0:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-12:
        high = low + (abs(low) or 1.0) * 0.1
    return low, high


def _fmt_x(chart: Chart, x: float) -> str:
    return f"{x:.0%}" if chart.x_percent else f"{x:g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 x 10^k, about `count` of them."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else round(value, 12))
        value += step
    return ticks or [low]


HOVER_POINTS = 60  # points per series that show their value on hover (<title>), evenly picked


def terminal(chart: Chart, width: int = 72, height: int = 16) -> str:
    """The chart drawn with characters, a marker per series, a legend underneath."""
    low, high = _range(chart)
    x0, x1 = float(chart.x.min()), float(chart.x.max())
    span = (x1 - x0) or 1.0
    grid = [[" "] * width for _ in range(height)]
    for x, _ in chart.markers:
        col = round((x - x0) / span * (width - 1))
        if 0 <= col < width:
            for row in range(height):
                grid[row][col] = ":"
    for index, line in enumerate(chart.series):
        mark = MARKERS[index % len(MARKERS)]
        for x, y in zip(chart.x, line.values, strict=True):
            if not math.isfinite(y):
                continue
            col = round((x - x0) / span * (width - 1))
            row = height - 1 - round((y - low) / (high - low) * (height - 1))
            grid[row][col] = mark
    label_width = max(len(f"{high:,.4g}"), len(f"{low:,.4g}"))
    lines = [chart.title, f"{chart.y_label}"]
    for row in range(height):
        label = f"{high:,.4g}" if row == 0 else (f"{low:,.4g}" if row == height - 1 else "")
        lines.append(f"{label:>{label_width}} |" + "".join(grid[row]))
    lines.append(" " * label_width + " +" + "-" * width)
    left, right = _fmt_x(chart, x0), _fmt_x(chart, x1)
    lines.append(" " * (label_width + 2) + left + " " * max(width - len(left) - len(right), 1) + right)
    lines.append(" " * (label_width + 2) + chart.x_label)
    legend = "   ".join(f"{MARKERS[i % len(MARKERS)]} {s.name}" for i, s in enumerate(chart.series))
    if chart.markers:
        legend += "   : " + ", ".join(f"{label} ({_fmt_x(chart, x)})" for x, label in chart.markers)
    lines.append("legend: " + legend)
    return "\n".join(lines)


def svg(chart: Chart, width: int = 760, height: int = 340) -> str:
    """The chart as a standalone SVG element (no scripts, no external resources)."""
    pad_left, pad_right, pad_top, pad_bottom = 70, 150, 30, 45
    low, high = _range(chart)
    x0, x1 = float(chart.x.min()), float(chart.x.max())
    span = (x1 - x0) or 1.0
    plot_w, plot_h = width - pad_left - pad_right, height - pad_top - pad_bottom

    def px(x: float) -> float:
        return pad_left + (x - x0) / span * plot_w

    def py(y: float) -> float:
        return pad_top + (1 - (y - low) / (high - low)) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<text x="{pad_left}" y="18" font-size="14" font-weight="bold">{html.escape(chart.title)}</text>',
        f'<rect x="{pad_left}" y="{pad_top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>',
    ]
    for y in nice_ticks(low, high):
        out.append(f'<line x1="{pad_left}" x2="{pad_left + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,.4g}</text>')
    out.extend(
        f'<text x="{px(x):.1f}" y="{pad_top + plot_h + 16}" text-anchor="middle">{html.escape(_fmt_x(chart, x))}</text>'
        for x in nice_ticks(x0, x1, 6)
    )
    out.append(
        f'<text x="{pad_left + plot_w / 2}" y="{height - 8}" text-anchor="middle">{html.escape(chart.x_label)}</text>'
    )
    out.append(
        f'<text x="14" y="{pad_top + plot_h / 2}" transform="rotate(-90 14 {pad_top + plot_h / 2})" '
        f'text-anchor="middle">{html.escape(chart.y_label)}</text>'
    )
    for x, label in chart.markers:
        out.append(
            f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{pad_top}" y2="{pad_top + plot_h}" '
            f'stroke="#999" stroke-dasharray="4 3"><title>{html.escape(label)}</title></line>'
        )
    for index, line in enumerate(chart.series):
        color = COLORS[index % len(COLORS)]
        segments: list[list[str]] = [[]]
        for x, y in zip(chart.x, line.values, strict=True):
            if math.isfinite(y):
                segments[-1].append(f"{px(x):.1f},{py(y):.1f}")
            elif segments[-1]:
                segments.append([])
        out.extend(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(points)}"/>'
            for points in segments
            if points
        )
        finite = [i for i, y in enumerate(line.values) if math.isfinite(y)]
        for i in finite[:: max(1, math.ceil(len(finite) / HOVER_POINTS))]:
            x, y = float(chart.x[i]), float(line.values[i])
            tip = f"{line.name}: {y:,.4g} at {chart.x_label} {_fmt_x(chart, x)}"
            out.append(
                f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}" '
                f'fill-opacity="0.25"><title>{html.escape(tip)}</title></circle>'
            )
        ly = pad_top + 14 + index * 18
        out.append(
            f'<line x1="{pad_left + plot_w + 12}" x2="{pad_left + plot_w + 32}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{pad_left + plot_w + 36}" y="{ly}">{html.escape(line.name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def html_page(title: str, charts: Sequence[Chart], notes: Sequence[str]) -> str:
    """A self-contained HTML page: the charts as inline SVG, then the notes as a list."""
    body = "\n".join(f"<figure>{svg(chart)}</figure>" for chart in charts)
    items = "\n".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}"
        "figure{margin:1em 0}li{margin:.3em 0}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>\n{body}\n<h2>Findings</h2><ul>\n{items}\n</ul></body></html>\n"
    )


def image(charts: Sequence[Chart], title: str, fmt: str) -> bytes:
    """PNG or SVG bytes from matplotlib; InputError when the optional extra is missing."""
    try:
        import matplotlib  # the optional `plot` extra: imported only when an image is asked for

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(
            f"--{fmt} needs matplotlib, an optional extra: pip install 'pddplan[plot]' (or use --html)"
        ) from None

    figure, axes = plt.subplots(len(charts), 1, figsize=(9, 3.6 * len(charts)), squeeze=False)
    for axis, chart in zip(axes[:, 0], charts, strict=True):
        for index, line in enumerate(chart.series):
            axis.plot(chart.x, line.values, label=line.name, color=COLORS[index % len(COLORS)], linewidth=1.8)
        for x, label in chart.markers:
            axis.axvline(x, color="#999", linestyle="--", linewidth=1)
            axis.annotate(label, (x, axis.get_ylim()[1]), fontsize=8, rotation=90, va="top", ha="right", color="#555")
        axis.set_title(chart.title)
        axis.set_xlabel(chart.x_label)
        axis.set_ylabel(chart.y_label)
        if chart.x_percent:
            axis.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axis.grid(True, alpha=0.3)
        axis.legend(loc="best", fontsize=9)
    figure.suptitle(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=120)
    plt.close(figure)
    return buffer.getvalue()
