"""Line charts of curves (hit-rate sweeps, parameter sweeps): in the terminal, as SVG/HTML, as PNG.

The terminal and HTML charts need nothing beyond the standard library; PNG and SVG files come from
matplotlib, an optional extra (`pip install 'pddplan[plot]'`).
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pddplan.errors import InputError
from pddplan.report.html_page import page
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
    """A chart: x values, lines, labels, and vertical markers (x, label). `x_log` draws x on a log
    scale (every x then positive); `x_ticks` (x, label) replaces the computed x ticks, e.g. with the
    sizes a user asked for; `x_unit` follows x values in markers and hover text ("20 s");
    `y_percent` shows y as percents."""

    title: str
    x: np.ndarray
    series: list[Series]
    x_label: str
    y_label: str
    markers: list[tuple[float, str]] = field(default_factory=list)
    x_percent: bool = False
    x_log: bool = False
    x_ticks: tuple[tuple[float, str], ...] = ()
    x_unit: str = ""
    y_percent: bool = False


def _range(chart: Chart) -> tuple[float, float]:
    values = np.concatenate([s.values[np.isfinite(s.values)] for s in chart.series] or [np.array([0.0])])
    if values.size == 0:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-12:
        high = low + (abs(low) or 1.0) * 0.1
    return low, high


def _fmt_x(chart: Chart, x: float) -> str:
    """An x value as a tick, marker or hover text shows it: a percent, the label of an explicit
    tick at that x, or the number and its unit."""
    if chart.x_percent:
        return f"{x:.0%}"
    for at, label in chart.x_ticks:
        if math.isclose(at, x, rel_tol=1e-9):
            return label
    return f"{x:g} {chart.x_unit}" if chart.x_unit else f"{x:g}"


def _fmt_y(chart: Chart, y: float) -> str:
    return f"{y:.0%}" if chart.y_percent else f"{y:,.4g}"


def _x_position(chart: Chart, x0: float, x1: float) -> Callable[[float], float]:
    """Where x sits between the axis ends x0 and x1, from 0 to 1 (log10 distance on a log axis)."""
    if chart.x_log:
        low, span = math.log10(x0), (math.log10(x1) - math.log10(x0)) or 1.0
        return lambda x: (math.log10(max(x, 1e-300)) - low) / span
    span = (x1 - x0) or 1.0
    return lambda x: (x - x0) / span


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


def log_ticks(low: float, high: float, count: int = 8) -> list[float]:
    """Ticks of a log axis over [low, high] (both > 0): 1, 2 and 5 x 10^k, or only the powers of
    ten when those would be more than `count`."""
    if not (0 < low < high and math.isfinite(high)):
        return [low]
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    ticks: list[float] = []
    for mantissas in ((1, 2, 5), (1,)):
        ticks = [float(f"{m}e{k}") for k in decades for m in mantissas]
        ticks = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
        if len(ticks) <= count:
            break
    return ticks or [low]


def nice_floor(value: float) -> float:
    """The largest 1, 2 or 5 x 10^k at most `value` (> 0): where a log axis starts."""
    power = math.floor(math.log10(value))
    return max(float(f"{m}e{k}") for k in (power - 1, power) for m in (1, 2, 5) if float(f"{m}e{k}") <= value)


HOVER_POINTS = 60  # points per series that show their value on hover (<title>), evenly picked


def terminal(chart: Chart, width: int = 72, height: int = 16) -> str:
    """The chart drawn with characters, a marker per series, a legend underneath."""
    low, high = _range(chart)
    x0, x1 = float(chart.x.min()), float(chart.x.max())
    where = _x_position(chart, x0, x1)
    grid = [[" "] * width for _ in range(height)]
    for x, _ in chart.markers:
        col = round(where(x) * (width - 1))
        if 0 <= col < width:
            for row in range(height):
                grid[row][col] = ":"
    for index, line in enumerate(chart.series):
        mark = MARKERS[index % len(MARKERS)]
        for x, y in zip(chart.x, line.values, strict=True):
            if not math.isfinite(y):
                continue
            col = round(where(x) * (width - 1))
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


# The SVG chart is drawn in a viewBox of SVG_WIDTH units and scales with its container (a phone
# shows it at about 0.7 of that, a desktop at up to SVG_MAX_WIDTH_PX), so nothing in it is wider
# than the viewBox: the title wraps, the legend wraps under the plot, tick labels that would
# overlap are left out.
SVG_WIDTH = 520
SVG_MAX_WIDTH_PX = 640
FONT_PX = 13
CHAR_WIDTH = 0.6  # average glyph width of a sans-serif font, in ems: for wrapping and spacing
LINE_PX = 18


def text_width(text: str, font_px: float = FONT_PX) -> float:
    """An estimate of `text`'s width in pixels (CHAR_WIDTH ems a character)."""
    return len(text) * font_px * CHAR_WIDTH


def wrap(text: str, width: float, font_px: float = FONT_PX) -> list[str]:
    """`text` in lines no wider than `width` units (an estimate from CHAR_WIDTH), broken at spaces."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(f"{lines[-1]} {word}", font_px) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines or [""]


def _legend(chart: Chart, top: float, width: float) -> tuple[list[str], float]:
    """Legend entries (a colour swatch and the series' name) in rows that wrap at `width`, then
    the series with no value at any x in one grey line; the SVG elements and the bottom y."""
    entries = [(COLORS[i % len(COLORS)], s.name) for i, s in enumerate(chart.series) if np.isfinite(s.values).any()]
    empty = [s.name for s in chart.series if not np.isfinite(s.values).any()]
    out: list[str] = []
    x, y = 10.0, top
    for color, name in entries:
        entry_w = 28 + text_width(name) + 14
        if x > 10 and x + entry_w > width - 10:
            x, y = 10.0, y + LINE_PX
        out.append(
            f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" stroke-width="3"/>'
        )
        out.append(f'<text x="{x + 28:.1f}" y="{y}">{html.escape(name)}</text>')
        x += entry_w
    if empty:
        for row in wrap("no points: " + ", ".join(empty), width - 20):
            y += LINE_PX
            out.append(f'<text x="10" y="{y}" fill="#666">{html.escape(row)}</text>')
    return out, y + 8


def _markers(chart: Chart, px: Callable[[float], float], top: float, bottom: float, x0: float, x1: float) -> list[str]:
    """Each marker a dashed vertical line labelled along it from the bottom ("P90 SLA 20 s"), on its
    left, or on its right when the previous label sits there or the plot's edge is too near."""
    out: list[str] = []
    last_px = -1e9
    for x, label in sorted(chart.markers):
        if not x0 <= x <= x1:
            continue
        at = px(x)
        text = f"{label} {_fmt_x(chart, x)}"
        side = at + 13 if at - last_px < 16 or at - 14 < px(x0) else at - 4
        last_px = at
        out.append(
            f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{bottom}" stroke="#777" stroke-dasharray="4 3">'
            f"<title>{html.escape(text)}</title></line>"
        )
        out.append(
            f'<text x="{side:.1f}" y="{bottom - 4}" transform="rotate(-90 {side:.1f} {bottom - 4})" '
            f'font-size="11" fill="#444">{html.escape(text)}</text>'
        )
    return out


def _x_axis(chart: Chart, px: Callable[[float], float], y: float, x0: float, x1: float) -> list[str]:
    """Tick labels under the plot, each left out when it would overlap the one before."""
    if chart.x_ticks:
        ticks = [(x, label) for x, label in chart.x_ticks if x0 <= x <= x1]
    else:
        values = log_ticks(x0, x1) if chart.x_log else nice_ticks(x0, x1, 6)
        ticks = [(x, f"{x:.0%}" if chart.x_percent else f"{x:g}") for x in values]
    out: list[str] = []
    right_edge = -1e9
    for x, label in ticks:
        half = text_width(label) / 2
        if px(x) - half < right_edge + 6:
            continue
        right_edge = px(x) + half
        out.append(f'<text x="{px(x):.1f}" y="{y}" text-anchor="middle">{html.escape(label)}</text>')
    return out


def svg(chart: Chart, width: int = SVG_WIDTH, plot_h: int = 220) -> str:
    """The chart as an SVG element that scales to its container (no scripts, no external
    resources): the title wrapped on top, the plot, the x axis, the legend underneath."""
    pad_left, pad_right = 62, 24
    title = wrap(chart.title, width - 20, 14)
    top = 8 + LINE_PX * len(title) + 10
    plot_w = width - pad_left - pad_right
    bottom = top + plot_h
    low, high = _range(chart)
    x0, x1 = float(chart.x.min()), float(chart.x.max())
    where = _x_position(chart, x0, x1)

    def px(x: float) -> float:
        return pad_left + where(x) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - low) / (high - low)) * plot_h

    out = [
        f'<rect x="{pad_left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>',
        *(
            f'<text x="10" y="{8 + 14 + LINE_PX * row}" font-size="14" font-weight="bold">{html.escape(text)}</text>'
            for row, text in enumerate(title)
        ),
    ]
    for y in nice_ticks(low, high):
        out.append(f'<line x1="{pad_left}" x2="{pad_left + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_fmt_y(chart, y)}</text>')
    out += _x_axis(chart, px, bottom + 17, x0, x1)
    out.append(
        f'<text x="{pad_left + plot_w / 2}" y="{bottom + 36}" text-anchor="middle">{html.escape(chart.x_label)}</text>'
    )
    out.append(
        f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
        f'text-anchor="middle">{html.escape(chart.y_label)}</text>'
    )
    out += _markers(chart, px, top, bottom, x0, x1)
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
            tip = f"{line.name}: {_fmt_y(chart, y)} at {chart.x_label} {_fmt_x(chart, x)}"
            out.append(
                f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}" '
                f'fill-opacity="0.25"><title>{html.escape(tip)}</title></circle>'
            )
    legend, height = _legend(chart, bottom + 60, width)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height:.0f}" width="{width}" '
        f'height="{height:.0f}" style="width:100%;max-width:{SVG_MAX_WIDTH_PX}px;height:auto" role="img" '
        f'aria-label="{html.escape(chart.title)}" font-family="sans-serif" font-size="{FONT_PX}">'
    )
    return "\n".join([head, *out, *legend, "</svg>"])


def html_page(title: str, charts: Sequence[Chart], notes: Sequence[str]) -> str:
    """A self-contained HTML page that reads on a phone and a desktop: the charts as inline SVG,
    then the notes as a list under "Findings" (no such heading without notes)."""
    body = "\n".join(f"<figure>{svg(chart)}</figure>" for chart in charts)
    if notes:
        items = "\n".join(f"<li>{html.escape(note)}</li>" for note in notes)
        body += f"\n<h2>Findings</h2><ul>\n{items}\n</ul>"
    return page(title, f"<h1>{html.escape(title)}</h1>\n{body}")


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
            axis.annotate(
                f"{label} {_fmt_x(chart, x)}",
                (x, axis.get_ylim()[1]),
                fontsize=8,
                rotation=90,
                va="top",
                ha="right",
                color="#555",
            )
        axis.set_title(chart.title)
        axis.set_xlabel(chart.x_label)
        axis.set_ylabel(chart.y_label)
        if chart.x_log:
            axis.set_xscale("log")
            axis.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        if chart.x_ticks:
            axis.set_xticks([x for x, _ in chart.x_ticks], [label for _, label in chart.x_ticks])
            axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        elif chart.x_percent:
            axis.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        if chart.y_percent:
            axis.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axis.grid(True, alpha=0.3)
        axis.legend(loc="best", fontsize=9)
    figure.suptitle(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=120)
    plt.close(figure)
    return buffer.getvalue()
