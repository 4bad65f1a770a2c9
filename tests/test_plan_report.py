"""The HTML plan report (`--report FILE`): what it holds, that it is self-contained, and that a real
browser (Debian's headless Chromium) renders it with no console error; plus its chart ticks and
sensitivity curves."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line

from pddplan.analyses.sensitivity import FACTORS, sensitivity
from pddplan.api import scenario_of
from pddplan.evaluate.analytic import evaluate
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.report.charts import nice_ticks

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
WORKLOAD = "pdd-agent-64k"
SECTIONS = ("deployment", "figures", "costs", "ttft-cdf", "tpot-cdf", "sensitivity", "inputs")


@pytest.fixture(scope="module")
def optimize_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from pddplan.cli import app

    path = tmp_path_factory.mktemp("report") / "plan.html"
    result = CliRunner().invoke(app, ["optimize", WORKLOAD, "--report", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert f"wrote the report to {path}" in result.stderr
    return path


def browser() -> str:
    """Debian's Chromium (`.ci/run` and the README's test command install it when missing)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no Chromium on PATH: install Debian's package (apt-get install -y chromium)")


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
    assert page.count("<svg") >= 5  # deployment, two CDFs, sensitivity, cost bars
    assert "P90 target" in page and "P99 target" in page  # the SLA marked on the TTFT CDF
    assert page.count("<title>") > 50  # values on hover


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
