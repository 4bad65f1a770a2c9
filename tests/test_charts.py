"""Charts (pddplan.report.charts): the terminal chart, SVG/HTML pages and matplotlib images, and the
`--png/--svg/--html` options of `pddplan bathtub` and `pddplan sweep`."""

from __future__ import annotations

import builtins
import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line
from typer.testing import CliRunner

from pddplan import architectures
from pddplan.analyses import bathtub as tub
from pddplan.cli import app
from pddplan.errors import InputError
from pddplan.inputs import load_workload, workload_dir
from pddplan.report import bathtub_report, charts
from pddplan.report.charts import Chart, Series

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_NS = "{http://www.w3.org/2000/svg}"
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`pddplan bathtub --points 11 --png --svg --html --json` once (as small as the charts need)."""
    folder = tmp_path_factory.mktemp("charts")
    out = {"png": folder / "tub.png", "svg": folder / "tub.svg", "html": folder / "tub.html"}
    result = run(
        "bathtub", "pdd-agent-64k", "--points", "11",
        "--png", out["png"], "--svg", out["svg"], "--html", out["html"], "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return {**out, "json": json.loads(result.stdout), "folder": folder}


@pytest.fixture(scope="module")
def result() -> tub.BathtubResult:
    """The same sweep through the library."""
    workload = load_workload("pdd-agent-64k")
    return tub.bathtub(workload, workload_dir("pdd-agent-64k"), architectures.names(), tub.BathtubOptions("fixed", 11))


# -- PNG ------------------------------------------------------------------------------------------
def drawn_architectures(result: tub.BathtubResult) -> list[int]:
    """Indices (colour slots) of the architectures with a plan at some hit rate: those draw a line
    (pd-hetero has none on pdd-agent-64k, whose home datacenter offers one GPU type; pd-cross none
    at the workload's own hit rate, where the deployment is sized and then kept)."""
    figures = result.figures
    return [i for i, arch in enumerate(result.architectures) if np.isfinite(figures[arch]["revenue_per_cost"]).any()]


def test_png_is_a_real_image(files: dict[str, Any], result: tub.BathtubResult) -> None:
    import matplotlib.image

    payload = files["png"].read_bytes()
    assert payload.startswith(PNG_SIGNATURE)
    assert len(payload) > 10_000
    pixels = matplotlib.image.imread(files["png"])
    # three stacked charts, 9 x 10.8 inches at 120 dpi
    assert pixels.shape == (1296, 1080, 4)
    flat = pixels.reshape(-1, pixels.shape[-1])
    channels = np.round(flat * 255).astype(np.uint32)
    packed = (channels[:, 0] << 24) | (channels[:, 1] << 16) | (channels[:, 2] << 8) | channels[:, 3]
    assert len(np.unique(packed)) > 50  # not a blank single colour
    # the line colours of the architectures with a plan are drawn
    assert len(drawn_architectures(result)) >= 2
    for color in (charts.COLORS[i] for i in drawn_architectures(result)):
        rgb = np.array([int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)])
        assert (np.abs(flat[:, :3] - rgb).max(axis=1) < 0.02).sum() > 100, color


def test_svg_file_is_valid_xml(files: dict[str, Any]) -> None:
    root = ET.parse(files["svg"]).getroot()
    assert root.tag == f"{SVG_NS}svg"
    text = files["svg"].read_text()
    assert "pddplan bathtub: pdd-agent-64k" in text
    for arch in architectures.names():
        assert arch in text


# -- HTML -----------------------------------------------------------------------------------------
def test_html_is_self_contained(files: dict[str, Any], result: tub.BathtubResult) -> None:
    page = files["html"].read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    assert "<title>pddplan bathtub: pdd-agent-64k</title>" in page
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.DOTALL)
    assert len(svgs) == 3  # revenue per cost, prefill throughput packed and alone
    for block, chart in zip(svgs, bathtub_report.charts(result), strict=True):
        root = ET.fromstring(block)
        assert root.tag == f"{SVG_NS}svg"
        lines = root.findall(f"{SVG_NS}polyline")
        assert [series.name for series in chart.series] == list(architectures.names())
        with_plan = [i for i, series in enumerate(chart.series) if np.isfinite(series.values).any()]
        assert with_plan == drawn_architectures(result)
        assert len(lines) >= len(with_plan)
        colors = [line.get("stroke") for line in lines]
        for index, series in enumerate(chart.series):
            color = charts.COLORS[index]
            drawn = [line for line in lines if line.get("stroke") == color]
            assert bool(drawn) == (index in with_plan), series.name
            # one vertex per feasible point
            vertices = sum(len((line.get("points") or "").split()) for line in drawn)
            assert vertices == int(np.isfinite(series.values).sum())
            assert html.escape(series.name) in block  # every architecture is named under the chart
        # an architecture with no point at any hit rate has no legend entry, only the "no points" line
        legend = [t.text for t in root.iter(f"{SVG_NS}text")]
        empty = [s.name for i, s in enumerate(chart.series) if i not in with_plan]
        assert [chart.series[i].name for i in with_plan] == [n for n in legend if n in architectures.names()]
        assert (f"no points: {', '.join(empty)}" in legend) == bool(empty)
        assert any((t or "").startswith("workload mean hit ") for t in legend)  # the mean-hit line is labelled
        assert set(colors) == {charts.COLORS[i] for i in with_plan}
        assert html.escape(chart.title) in block


def test_html_lists_the_findings(files: dict[str, Any], result: tub.BathtubResult) -> None:
    page = files["html"].read_text()
    assert "<h2>Findings</h2>" in page
    items = re.findall(r"<li>(.*?)</li>", page, re.DOTALL)
    assert items == [html.escape(note) for note in bathtub_report.findings_text(result)]
    assert any("predicts tail-chunk dips" in item for item in items)
    for arch in architectures.names():
        assert any(item.startswith(f"{arch}: ") for item in items)


def test_the_cli_and_the_library_agree(files: dict[str, Any], result: tub.BathtubResult) -> None:
    assert files["json"] == json.loads(
        json.dumps(result.to_output().json_data(), allow_nan=True).replace("NaN", "null")
    )


def test_html_needs_no_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block_matplotlib(monkeypatch)
    result = run("bathtub", "pdd-agent-64k", "--points", "5", "-a", "pd-intra", "--html", tmp_path / "t.html")
    assert result.exit_code == 0, result.stderr
    assert "<svg" in (tmp_path / "t.html").read_text()


# -- without matplotlib ---------------------------------------------------------------------------
def block_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


@pytest.mark.parametrize("option", ["--png", "--svg"])
def test_image_without_matplotlib_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    block_matplotlib(monkeypatch)
    target = tmp_path / f"t.{option[2:]}"
    result = run("bathtub", "pdd-agent-64k", "--points", "5", "-a", "pd-intra", option, target)
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "pddplan[plot]" in lines[0] and option in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_image_function_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    block_matplotlib(monkeypatch)
    with pytest.raises(InputError, match=r"pddplan\[plot\]"):
        charts.image([simple_chart()], "t", "png")


# -- the terminal chart ---------------------------------------------------------------------------
def simple_chart(**changes: Any) -> Chart:
    fields: dict[str, Any] = {
        "title": "T",
        "x": np.array([0.0, 0.25, 0.5, 0.75, 1.0]),
        "series": [
            Series("up", np.array([1.0, 2.0, 3.0, 4.0, 5.0])),
            Series("down", np.array([5.0, np.nan, 3.0, 2.0, 1.0])),
        ],
        "x_label": "hit",
        "y_label": "value",
        "markers": [(0.5, "mean")],
        "x_percent": True,
    }
    fields.update(changes)
    return Chart(**fields)


@pytest.mark.parametrize(("width", "height"), [(72, 16), (40, 8), (100, 25)])
def test_terminal_dimensions(width: int, height: int) -> None:
    text = charts.terminal(simple_chart(), width=width, height=height)
    lines = text.splitlines()
    assert len(lines) == height + 6  # title, y label, rows, axis, x range, x label, legend
    assert lines[0] == "T" and lines[1] == "value"
    rows = lines[2 : 2 + height]
    label_width = len("5")
    for row in rows:
        assert len(row) == label_width + 2 + width
        assert row[label_width : label_width + 2] == " |"
    assert rows[0].startswith("5 |") and rows[-1].startswith("1 |")
    assert lines[2 + height] == " " * label_width + " +" + "-" * width
    assert lines[3 + height].strip().startswith("0%") and lines[3 + height].rstrip().endswith("100%")
    assert len(lines[3 + height]) == label_width + 2 + width
    assert lines[4 + height].strip() == "hit"
    assert lines[-1] == "legend: o up   x down   : mean (50%)"


def test_terminal_places_the_points() -> None:
    width, height = 41, 9
    lines = charts.terminal(simple_chart(), width=width, height=height).splitlines()
    grid = [row[3:] for row in lines[2 : 2 + height]]  # strip "5 |"
    # up: (0, 1) bottom-left, (1, 5) top-right; down: (0, 5) top-left, (1, 1) bottom-right
    assert grid[-1][0] == "o" and grid[0][-1] == "o"
    assert grid[0][0] == "x" and grid[-1][-1] == "x"
    # the marker column at 50% (col 20): the series drawn over it at y = 3 (middle row)
    column = [row[20] for row in grid]
    assert column[4] == "x"  # both series pass (0.5, 3); the later one is drawn on top
    assert all(c == ":" for i, c in enumerate(column) if i != 4)
    # the nan of "down" at 25% leaves no mark there
    assert sum(row[10] == "x" for row in grid) == 0
    assert sum(row[10] == "o" for row in grid) == 1
    assert sum(row.count("o") for row in grid) == 5 - 1  # (0.5, 3) is overdrawn by x
    assert sum(row.count("x") for row in grid) == 4


def test_terminal_of_bathtub_charts(result: tub.BathtubResult) -> None:
    for chart in bathtub_report.charts(result):
        lines = charts.terminal(chart).splitlines()
        assert len(lines) == 16 + 6
        # one marker per architecture, in the registry's order
        legend = "legend: o agg   x pd-intra   * pd-hetero   + pd-cross   # pdd   : workload mean hit (91%)"
        assert lines[-1].startswith(legend)
        assert lines[-3].split() == ["0%", "100%"]


def test_terminal_degenerate_inputs() -> None:
    flat = simple_chart(series=[Series("flat", np.full(5, 2.0))], markers=[])
    lines = charts.terminal(flat, width=20, height=5).splitlines()
    assert len(lines) == 11 and lines[-1] == "legend: o flat"
    empty = simple_chart(series=[Series("none", np.full(5, np.nan))], markers=[])
    lines = charts.terminal(empty, width=20, height=5).splitlines()
    assert len(lines) == 11
    assert not any("o" in row.split("|", 1)[1] for row in lines[2:7])
    single = simple_chart(x=np.array([3.0]), series=[Series("one", np.array([1.0]))], markers=[], x_percent=False)
    lines = charts.terminal(single, width=20, height=5).splitlines()
    assert len(lines) == 11
    assert sum(row.count("o") for row in lines[2:7]) == 1


# -- SVG and HTML of hand-made charts -------------------------------------------------------------
def test_svg_splits_lines_at_gaps() -> None:
    root = ET.fromstring(charts.svg(simple_chart()))
    assert root.tag == f"{SVG_NS}svg"
    lines = root.findall(f"{SVG_NS}polyline")
    up = [line for line in lines if line.get("stroke") == charts.COLORS[0]]
    down = [line for line in lines if line.get("stroke") == charts.COLORS[1]]
    assert [len(line.get("points", "").split()) for line in up] == [5]
    assert [len(line.get("points", "").split()) for line in down] == [1, 3]
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "up" in texts and "down" in texts and "T" in texts and "hit" in texts
    assert root.find(f"{SVG_NS}line/{SVG_NS}title") is not None  # the marker carries its label


def test_html_page_escapes_text() -> None:
    chart = simple_chart(title="a <b> & c", series=[Series("<x>", np.ones(5))])
    page = charts.html_page("t & <u>", [chart], ["1 < 2 & 3 > 2"])
    assert "<title>t &amp; &lt;u&gt;</title>" in page
    assert "<li>1 &lt; 2 &amp; 3 &gt; 2</li>" in page
    assert "a &lt;b&gt; &amp; c" in page and "&lt;x&gt;" in page
    (block,) = re.findall(r"<svg\b.*?</svg>", page, re.DOTALL)
    ET.fromstring(block)


def test_html_page_without_notes_has_no_findings_heading() -> None:
    page = charts.html_page("curve", [simple_chart()], [])
    assert "Findings" not in page and "<ul>" not in page
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page


def test_svg_scales_and_keeps_its_text_inside() -> None:
    """The SVG scales with its container (a viewBox, width 100%); a long title wraps, the legend
    wraps under the plot, and no text starts or (by the drawing's own width estimate) ends outside
    the viewBox; a series with no value is named in a grey line instead of the legend."""
    many = [Series(f"a rather long series name {i}", np.arange(5.0) + i) for i in range(5)]
    chart = simple_chart(title="a title much longer than one line of the chart can hold " * 2, series=many)
    root = ET.fromstring(charts.svg(chart))
    _, _, width, height = (float(v) for v in (root.get("viewBox") or "").split())
    assert "width:100%" in (root.get("style") or "")
    texts = [t for t in root.iter(f"{SVG_NS}text") if not t.get("transform")]
    for text in texts:
        span = charts.text_width(text.text or "", float(text.get("font-size") or charts.FONT_PX))
        left = float(text.get("x", 0)) - (span / 2 if text.get("text-anchor") == "middle" else 0)
        left -= span if text.get("text-anchor") == "end" else 0
        assert left >= 0 and left + span <= width and float(text.get("y", 0)) <= height, text.text
    assert sum("title much longer" in (t.text or "") for t in texts) == 2  # wrapped: the words twice, over lines
    legend_rows = {t.get("y") for t in texts if (t.text or "").startswith("a rather long")}
    assert len(legend_rows) > 1
    root = ET.fromstring(
        charts.svg(simple_chart(series=[Series("up", np.ones(5)), Series("gone", np.full(5, np.nan))]))
    )
    words = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "up" in words and "gone" not in words and "no points: gone" in words


def test_markers_are_labelled_with_their_value() -> None:
    root = ET.fromstring(charts.svg(simple_chart(markers=[(0.5, "mean"), (0.75, "P90 SLA")])))
    labels = [t.text for t in root.iter(f"{SVG_NS}text") if (t.get("transform") or "").startswith("rotate(-90")]
    assert "mean 50%" in labels and "P90 SLA 75%" in labels
    timed = simple_chart(x=np.array([0.1, 1.0, 10.0]), series=[Series("s", np.ones(3))], markers=[(2.0, "P90 SLA")])
    timed = Chart(**{**timed.__dict__, "x_percent": False, "x_unit": "s", "x_log": True})
    assert "P90 SLA 2 s" in charts.svg(timed)


def test_log_ticks_and_the_round_start_by_hand() -> None:
    assert charts.log_ticks(0.2, 20.0) == [0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    assert charts.log_ticks(0.03, 0.1) == [0.05, 0.1]
    assert charts.log_ticks(1.0, 1e6) == [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0]  # decades only
    assert charts.log_ticks(0.0, 1.0) == [0.0]
    assert [charts.nice_floor(v) for v in (0.3, 0.2, 0.0421, 7.0, 1.0)] == [0.2, 0.2, 0.02, 5.0, 1.0]


def test_a_log_axis_places_points_by_ratio() -> None:
    """x = 1, 10, 100 on a log axis: 10 sits half way, in the terminal and in the SVG."""
    chart = Chart("T", np.array([1.0, 10.0, 100.0]), [Series("s", np.array([1.0, 2.0, 3.0]))], "x", "y", x_log=True)
    rows = charts.terminal(chart, width=21, height=3).splitlines()[2:5]
    assert [row.split("|", 1)[1].index("o") for row in rows] == [20, 10, 0]
    (line,) = ET.fromstring(charts.svg(chart)).iter(f"{SVG_NS}polyline")
    xs = [float(p.split(",")[0]) for p in (line.get("points") or "").split()]
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.11)


def test_image_bytes() -> None:
    png = charts.image([simple_chart(), simple_chart(title="second")], "both", "png")
    assert png.startswith(PNG_SIGNATURE)
    svg = charts.image([simple_chart()], "one", "svg")
    assert ET.fromstring(svg).tag == f"{SVG_NS}svg"


# -- sweep charts ---------------------------------------------------------------------------------
def test_sweep_writes_charts(tmp_path: Path) -> None:
    result = run(
        "sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "2,4", "-a", "pd-intra", "-a", "pdd",
        "--png", tmp_path / "s.png", "--html", tmp_path / "s.html",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "s.png").read_bytes().startswith(PNG_SIGNATURE)
    page = (tmp_path / "s.html").read_text()
    assert not EXTERNAL.search(page)
    assert page.count("<polyline") == 2
    assert "BCR vs arrival.rate_rps" in page
    assert "<li>from arrival.rate_rps = 2: best is " in page


@pytest.mark.parametrize("command", ["bathtub", "sweep"])
def test_png_without_matplotlib_fails_before_the_work(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """After a plain `pip install .` the README's bathtub example used to run 4 s, then fail on
    --png and leave the --html unwritten too. Now it says what to install, at once."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    extra = ("--param", "arrival.rate_rps", "--values", "2") if command == "sweep" else ()
    html = tmp_path / "c.html"
    result = cli(command, "chat-short-lowhit", *extra, "--png", str(tmp_path / "c.png"), "--html", str(html))
    one_error_line(result, "--png needs matplotlib", "pddplan[plot]")
    assert not html.exists()


@pytest.mark.parametrize(("option", "name"), [("--png", "chart.svg"), ("--svg", "chart.png"), ("--png", "chart")])
def test_an_image_named_as_another_kind_is_refused(tmp_path: Path, option: str, name: str) -> None:
    """`--png chart.svg` wrote PNG bytes under the .svg name (`--report` already insisted on .html)."""
    from cli_results import one_error_line

    one_error_line(run("bathtub", "pdd-agent-64k", "--points", "3", option, tmp_path / name), option, "name it")
    assert list(tmp_path.iterdir()) == []
