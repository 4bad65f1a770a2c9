"""The HTML plan report (`--report FILE`): what it holds, that it is self-contained, and that a real
browser (Debian's headless Chromium) renders it with no console error; every HTML page pddplan
writes at a phone's and a desktop's width; plus its chart ticks and sensitivity curves."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line
from headless_page import DESKTOP_WIDTH_PX, PHONE_WIDTH_PX, browser, render

from pddplan.analyses.sensitivity import FACTORS, sensitivity
from pddplan.api import scenario_of
from pddplan.evaluate import evaluate
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.report.charts import nice_ticks
from pddplan.report.plan_html import cdf_chart, deployment_svg, samples_cdf_chart

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
WORKLOAD = "pdd-agent-64k"
SECTIONS = ("deployment", "figures", "costs", "ttft-cdf", "tpot-cdf", "sensitivity", "inputs")
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"
SVG_NS = "{http://www.w3.org/2000/svg}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def optimize_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from pddplan.cli import app

    path = tmp_path_factory.mktemp("report") / "plan.html"
    result = CliRunner().invoke(app, ["optimize", WORKLOAD, "--report", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert f"wrote the report to {path}" in result.stderr
    return path


def headless(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            browser(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=page.parent,
    )


def console_messages(run: subprocess.CompletedProcess[str]) -> list[str]:
    """What the page wrote to the browser console (messages, uncaught errors), from Chromium's log."""
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


# -- the page -------------------------------------------------------------------------------------------
def test_optimize_report_has_every_section_and_no_external_resource(optimize_report: Path) -> None:
    page = optimize_report.read_text()
    for section in (*SECTIONS, "architectures"):
        assert f'<section id="{section}">' in page, section
    for fetch in ("<script", "<link", " src=", "@import", "url("):
        assert fetch not in page, fetch
    assert page.count("<svg") >= 5  # deployment (side by side and stacked), two CDFs, sensitivity
    assert "P90 SLA 10 s" in page and "P99 SLA 20 s" in page  # the SLA marked and labelled on the TTFT CDF
    assert page.count("<title>") > 50  # values on hover


def test_optimize_report_leads_with_the_verdict_and_shows_every_architecture(optimize_report: Path) -> None:
    """The verdict is the first section, in the terminal's words (the winner, PDD against each
    baseline, whether to disaggregate); every feasible architecture has a TTFT line on one chart
    and the others' deployments are drawn too (agg's and pd-intra's here, where pdd wins)."""
    page = optimize_report.read_text()
    assert page.index('<section id="verdict">') < page.index('<section id="deployment">')
    verdict = section(page, "verdict")
    assert re.search(r"<strong>pdd wins \(the highest BCR\): \$[0-9.,]+/h", verdict)
    assert "PDD vs pd-intra: cost" in verdict and "PDD vs agg: cost" in verdict
    assert "disaggregate? yes: pdd wins" in verdict
    legend = section(page, "ttft-by-architecture")
    for name in ("agg", "pd-intra", "pdd"):
        assert f">{name}</text>" in legend, name
    assert ">pd-cross</text>" not in legend  # infeasible here: no plan to draw
    others = section(page, "other-deployments")
    assert others.count("<details>") == 2
    assert re.search(r"<summary>pd-intra: \d+ x gpu-a</summary>", others)
    assert re.search(r"<summary>agg: \d+ x gpu-b</summary>", others)
    assert "P+D: " in others and "D: " in others


def test_samples_cdf_chart_draws_a_line_per_sample_on_one_axis() -> None:
    """By hand: the axis runs from 0.2 s (under the shortest, 0.3 s, in either sample) to the 20 s
    target; at 1 s, 2 of 3 of "a" and 0 of 2 of "b" are done."""
    samples = {"a": np.array([0.3, 0.5, 1.2]), "b": np.array([1.5, 4.0, np.inf])}
    chart = samples_cdf_chart("TTFT", samples, [(20.0, "P99 SLA")])
    assert chart.x[0] == pytest.approx(0.2) and chart.x[-1] == pytest.approx(20.0)
    at_one = int(np.searchsorted(chart.x, 1.0, side="right")) - 1
    assert [s.name for s in chart.series] == ["a", "b"]
    assert [float(s.values[at_one]) for s in chart.series] == [2 / 3, 0.0]
    assert [float(s.values[-1]) for s in chart.series] == [1.0, 1.0]


@pytest.mark.parametrize("command", ["evaluate", "simulate"])
def test_evaluate_and_simulate_write_the_report(command: str, cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "plan.html"
    extra = ["--requests", "3000"] if command == "simulate" else []
    result = cli(command, str(PLAN), WORKLOAD, *extra, "--report", str(path))
    assert result.exit_code == 0, result.stderr
    page = path.read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    assert "architectures" not in page.split("<h1>")[1].split("</h1>")[0]
    assert ("simulated, 3,000 requests" in page) == (command == "simulate")


def section(page: str, sid: str) -> str:
    return page.split(f'<section id="{sid}">', 1)[1].split("</section>", 1)[0]


def test_the_report_shows_the_data_and_says_what_it_caps(pages: dict[str, Path]) -> None:
    """TTFT on a log time axis with a line per pipeline; the main decoder named MD beside the relay;
    the hit-rate points the sensitivity caps said so (pdd-agent-64k's mean hit, 91.1%, passes 99.5%
    at x1.1 and x1.2); the input files folded away."""
    page = pages["evaluate"].read_text()
    ttft = section(page, "ttft-cdf")
    assert "seconds (log scale)" in ttft and ">P-MD (" in ttft and ">P-RLD-MD (" in ttft
    assert "<td>MD (" in section(page, "costs") and "<td>D (" not in section(page, "costs")
    assert "prefix hit rate (x1.1, x1.2 capped at 99.5%)" in section(page, "sensitivity")
    inputs = section(page, "inputs")
    assert inputs.count("<details>") == 2 and inputs.count("<pre>") == 2
    assert inputs.count("<pre>") == len(re.findall(r"<details><summary>[^<]*</summary><pre>", inputs))


def test_the_deployment_diagram_keeps_every_label_inside_it() -> None:
    """Both layouts: every text within the drawing (the line's bandwidth was once drawn above its
    top edge and cut off), the line's bandwidth and lease shown, the main decoder named MD."""
    scenario = scenario_of(PLAN, WORKLOAD)
    for stacked in (False, True):
        root = ET.fromstring(deployment_svg(scenario, 0.25, stacked=stacked))
        _, _, width, height = (float(v) for v in (root.get("viewBox") or "").split())
        texts = list(root.iter(f"{SVG_NS}text"))
        words = [t.text or "" for t in texts]
        assert "100 Gbps" in words and "1 x express-100g" in words and "25% used" in words
        assert any(w.startswith("MD: ") for w in words) and not any(w.startswith("D: ") for w in words)
        for text in texts:
            x, y = float(text.get("x", 0)), float(text.get("y", 0))
            size = float(text.get("font-size") or root.get("font-size") or 13)
            span = size * 0.6 * len(text.text or "")  # the drawing's own estimate of a text's width
            left = x - span / 2 if text.get("text-anchor") == "middle" else x
            assert size <= y <= height and left >= 0 and left + span <= width, (stacked, text.text)


def test_cdf_chart_on_a_log_axis_with_a_line_per_pipeline() -> None:
    """From 0.2 s (the round value under the shortest, 0.3 s) to the P99 target, 20 s; shares by hand."""
    values = np.array([0.3, 0.5, 1.2, 1.4])
    targets = [(10.0, "P90 SLA"), (20.0, "P99 SLA")]
    chart = cdf_chart("TTFT", values, targets, np.array(["P-MD", "P-MD", "P-RLD-MD", "P-MD"]))
    assert chart.x_log and chart.x[0] == pytest.approx(0.2) and chart.x[-1] == pytest.approx(20.0)
    assert np.allclose(np.diff(np.log(chart.x)), np.log(100) / (len(chart.x) - 1))  # even in log time
    assert [s.name for s in chart.series] == ["all requests", "P-MD (75%)", "P-RLD-MD (25%)"]
    at_one = int(np.searchsorted(chart.x, 1.0, side="right")) - 1  # the last x at most 1 s
    assert [float(s.values[at_one]) for s in chart.series] == [0.5, 2 / 3, 0.0]
    assert all(float(s.values[-1]) == 1.0 for s in chart.series)
    assert [s.name for s in cdf_chart("TTFT", values, targets, np.array(["P-D"] * 4)).series] == ["all requests"]


def test_a_report_not_named_html_is_refused_before_any_work(cli: Any, tmp_path: Path) -> None:
    result = cli("evaluate", str(PLAN), WORKLOAD, "--report", str(tmp_path / "plan.png"))
    one_error_line(result, "--report", "plan.png", ".html")
    assert not (tmp_path / "plan.png").exists()


# -- in a real browser ----------------------------------------------------------------------------------
def test_the_report_renders_in_headless_chromium_without_console_errors(optimize_report: Path) -> None:
    dom = headless(optimize_report, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for section in (*SECTIONS, "architectures"):
        assert f'id="{section}"' in dom.stdout, section
    assert console_messages(dom) == []
    shot = optimize_report.with_suffix(".png")
    run = headless(optimize_report, "--hide-scrollbars", "--window-size=1100,3800", f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


@pytest.fixture(scope="module")
def pages(optimize_report: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every kind of HTML page pddplan writes, each from a small input: the plan report of optimize
    (the architectures table) and of evaluate, and the curve pages of bathtub, sweep and cache-curve."""
    from typer.testing import CliRunner

    from pddplan.cli import app

    folder = tmp_path_factory.mktemp("pages")
    commands = {
        "evaluate": ["evaluate", str(PLAN), WORKLOAD, "--report"],
        "bathtub": ["bathtub", WORKLOAD, "--points", "5", "-a", "pd-intra", "-a", "pd-hetero", "-a", "pdd", "--html"],
        "sweep": ["sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "2,4", "-a", "pd-intra", "--html"],
        "cache-curve": ["cache-curve", str(MOONCAKE), "--capacity", "100Ktok,1Mtok,10Mtok", "--html"],
    }
    out = {"optimize": optimize_report}
    for name, args in commands.items():
        out[name] = folder / f"{name}.html"
        result = CliRunner().invoke(app, [*args, str(out[name])], catch_exceptions=False)
        assert result.exit_code == 0, (name, result.stderr)
    return out


@pytest.mark.parametrize("width", [PHONE_WIDTH_PX, DESKTOP_WIDTH_PX])
@pytest.mark.parametrize("kind", ["optimize", "evaluate", "bathtub", "sweep", "cache-curve"])
def test_every_html_page_fits_a_phone_and_a_desktop(
    pages: dict[str, Path], kind: str, width: int, tmp_path: Path
) -> None:
    """At 390 px (a phone: mobile viewport) and at 1280 px the page is laid out at the screen's own
    width (the viewport tag; without it a phone lays it out 980 px wide), nothing makes the page
    scroll sideways (charts scale, tables scroll in their own box), and the console stays empty.
    The screenshot is kept beside the test's files."""
    shown = render(pages[kind], width)
    # a phone zooms out to show a page wider than itself: then innerWidth grows with the page
    assert (shown.scroll_width_px, shown.inner_width_px) == (width, width), kind
    assert shown.console == []
    shot = tmp_path / f"{kind}-{width}.png"
    shot.write_bytes(shown.screenshot_png)
    assert shown.screenshot_png.startswith(PNG_SIGNATURE)
    assert int.from_bytes(shown.screenshot_png[16:20], "big") == width  # the PNG header's width


def test_the_width_check_catches_a_page_too_wide(tmp_path: Path) -> None:
    """The checks above can fail: a fixed 600 px block overflows a phone; a page without a viewport
    tag is laid out 980 px wide there."""
    wide = tmp_path / "wide.html"
    wide.write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">'
        '</head><body><div style="width:600px">wide</div></body></html>'
    )
    shown = render(wide, PHONE_WIDTH_PX)
    assert shown.scroll_width_px > PHONE_WIDTH_PX and shown.inner_width_px == shown.scroll_width_px
    bare = tmp_path / "bare.html"
    bare.write_text("<!DOCTYPE html><html><body>no viewport tag</body></html>")
    assert render(bare, PHONE_WIDTH_PX).inner_width_px == 980


def test_the_console_check_catches_a_page_error(tmp_path: Path) -> None:
    """The check above can fail: a page that throws is reported."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><script>throw new Error("broken page")</script></body></html>')
    assert any("broken page" in line for line in console_messages(headless(page, "--dump-dom")))


# -- charts and sensitivity -----------------------------------------------------------------------------
def test_ticks_are_round_by_hand() -> None:
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(65.76, 145.8) == [80.0, 100.0, 120.0, 140.0]
    assert nice_ticks(0.8, 1.2) == [0.8, 0.9, 1.0, 1.1, 1.2]
    assert nice_ticks(-3.0, 3.0) == [-2.0, 0.0, 2.0]
    assert nice_ticks(2.0, 2.0) == [2.0]


def test_sensitivity_is_the_plan_at_factor_one_and_prices_lower_bcr() -> None:
    scenario = scenario_of(PLAN, WORKLOAD)
    inputs = load_input_set(load_workload(WORKLOAD), workload_dir(WORKLOAD))
    curves = sensitivity(scenario, inputs)
    nominal = evaluate(scenario).bcr
    one = FACTORS.index(1.0)
    assert set(curves.bcr) == {"gpu-a price", "gpu-b price", "line price", "prefix hit rate", "request rate"}
    for name, values in curves.bcr.items():
        assert values[one] == pytest.approx(nominal, rel=1e-9), name
    for name in ("gpu-a price", "gpu-b price", "line price"):
        assert np.all(np.diff(curves.bcr[name]) < 0), name  # dearer never buys more per dollar
    # costs add up: GPU-A at 1.2x adds 0.2 x the GPU-A $/h, so BCR = goodput * 3600 / that cost
    gpu_a = sum(role.usd_per_hour for role in scenario.roles.values() if role.spec.gpu == "gpu-a")
    expected = 4.0 * 3600 / (scenario.cost_per_hour + 0.2 * gpu_a)
    assert curves.bcr["gpu-a price"][-1] == pytest.approx(expected, rel=1e-9)
