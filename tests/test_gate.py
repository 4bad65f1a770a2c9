"""`pddplan gate`: the cost gate over committed scenarios (pddplan.analyses.gate, pddplan.specs.baseline,
pddplan.report.gate_report and the CLI).

Exit codes: 0 pass (a refresh hint when improved), 1 regression, 2 missing/corrupt baseline or bad
scenario. The CLI tests use one cheap scenario: chat-short-lowhit reduced to one datacenter (so
`--init`, which optimizes every architecture, is fast), a Poisson arrival and a looser TTFT SLA (so a
500-request verification is stable), gated for pd-intra with 500 requests. Its best plan is
N x h100-sxm at the profile's 1.37 $/GPU-hour (N = 16 today), so a price override scales cost and BCR
exactly; expected figures are derived from N.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_results import one_error_line
from rich.console import Console
from typer.testing import CliRunner

from pddplan.analyses import gate as gating
from pddplan.cli import app
from pddplan.errors import InputError
from pddplan.report.gate_report import markdown as gate_markdown
from pddplan.report.gate_report import print_checks
from pddplan.specs.baseline import Baseline, GateScenario, ScenarioResult, Tolerances

ROOT = Path(__file__).resolve().parent.parent
PROFILE_PRICE = 1.37  # hardware_profiles/h100-sxm.yaml, rental $/GPU-hour


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough that no table cell wraps."""
    monkeypatch.setenv("COLUMNS", "300")


def run(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env, catch_exceptions=False)


def workload_data(price: float | None = None, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "workloads" / "chat-short-lowhit.yaml").read_text())
    data["arrival"] = {"rate_rps": 20, "process": "poisson"}
    data["sla"] = {"ttft_p90_s": 5.0, "ttft_p99_s": 10.0, "tpot_p90_s": 0.05}
    offer: dict[str, Any] = {"type": "h100-sxm", "max_count": 64}
    if price is not None:
        offer["usd_per_gpu_hour"] = price
    data["deployment"] = {"datacenters": [{"name": "dc-a", "gpus": [offer]}]}
    data["sources"].pop("alibaba-express-connect")
    data.update(changes)
    return data


def write_workload(path: Path, price: float | None = None, **changes: Any) -> Path:
    path.write_text(yaml.safe_dump(workload_data(price, **changes), sort_keys=False))
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with w.yaml and b.json, created by `pddplan gate b.json --init w.yaml`, then set to
    gate agg (the best architecture on its one GPU type) with 500 verification requests."""
    folder = tmp_path_factory.mktemp("gate-template")
    write_workload(folder / "w.yaml")
    # the workload is named as the shell sees it (relative to the working directory) and stored
    # relative to the baseline's folder
    result = run("gate", folder / "b.json", "--init", str(folder / "w.yaml"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    said = " ".join(result.stderr.split())  # the console wraps long paths
    assert "wrote" in said and "1 scenario" in said
    data = json.loads((folder / "b.json").read_text())
    assert data["scenarios"][0]["workload"] == "w.yaml"
    data["scenarios"][0]["options"].update({"architectures": ["agg"], "requests": 500})
    (folder / "b.json").write_text(json.dumps(data, indent=2) + "\n")
    return folder


@pytest.fixture()
def work(template: Path, tmp_path: Path) -> Path:
    """A private copy of the template folder."""
    target = tmp_path / "gate"
    shutil.copytree(template, target)
    return target


def committed_gpus(folder: Path) -> int:
    """N: the H100s of the committed best plan."""
    gpus = baseline_json(folder)["scenarios"][0]["result"]["gpus"]
    assert list(gpus) == ["h100-sxm"]
    return int(gpus["h100-sxm"])


def g4(value: float) -> str:
    """A figure as the markdown shows it."""
    return f"{value:,.4g}"


def baseline_json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "b.json").read_text())
    return data


def save_baseline(folder: Path, data: dict[str, Any]) -> None:
    (folder / "b.json").write_text(json.dumps(data, indent=2) + "\n")


def with_scenario(folder: Path, name: str, workload: str) -> None:
    """Add a scenario `name` on `workload` with the template's options and committed result."""
    data = baseline_json(folder)
    extra = json.loads(json.dumps(data["scenarios"][0]))
    extra.update({"name": name, "workload": workload})
    data["scenarios"].append(extra)
    save_baseline(folder, data)


def gate_json(result: Any, code: int) -> dict[str, Any]:
    assert result.exit_code == code, (result.exit_code, result.stderr)
    out: dict[str, Any] = json.loads(result.stdout)
    return out


# -- the committed baseline -----------------------------------------------------------------------
def test_init_writes_a_valid_baseline(template: Path) -> None:
    baseline = Baseline.model_validate(baseline_json(template))
    assert baseline.version == 1
    assert baseline.tolerances == Tolerances(rtol=0.01, per_metric={})
    (scenario,) = baseline.scenarios
    assert scenario.name == "w"
    assert scenario.workload == "w.yaml"
    result = scenario.result
    assert result.feasible and result.best == "agg"  # co-located serving is cheapest on one GPU type here
    assert list(result.gpus) == ["h100-sxm"] and result.gpus["h100-sxm"] > 0
    n = result.gpus["h100-sxm"]
    assert result.cost_usd_per_hour is not None
    assert result.cost_usd_per_hour == pytest.approx(n * PROFILE_PRICE, rel=1e-9)
    assert result.goodput_rps == pytest.approx(20.0)
    assert result.bcr == pytest.approx(20.0 * 3600 / result.cost_usd_per_hour, rel=1e-6)
    assert result.ttft_p90_s is not None and result.ttft_p90_s <= 5.0


def test_init_refuses_an_existing_baseline(work: Path) -> None:
    before = (work / "b.json").read_bytes()
    one_error_line(run("gate", work / "b.json", "--init", "w.yaml"), "exists", "--update")
    assert (work / "b.json").read_bytes() == before


def test_init_reads_the_workload_path_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pddplan gate ci/b.json --init w.yaml` run where w.yaml is: the path on the command line is
    the user's (relative to the current directory), and the baseline must then find it again."""
    write_workload(tmp_path / "w.yaml")
    (tmp_path / "ci").mkdir()
    monkeypatch.chdir(tmp_path)
    created = run("gate", "ci/b.json", "--init", "w.yaml")
    assert created.exit_code == 0, created.stderr
    data = json.loads((tmp_path / "ci" / "b.json").read_text())
    data["scenarios"][0]["options"].update({"architectures": ["pd-intra"], "requests": 500})
    (tmp_path / "ci" / "b.json").write_text(json.dumps(data))
    checked = gate_json(run("gate", "ci/b.json", "--json"), 0)
    assert checked["scenarios"][0]["verdict"] == "unchanged"


def test_unchanged_inputs_pass(work: Path) -> None:
    result = run("gate", work / "b.json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "w: best agg -> agg" in result.stdout
    assert "unchanged" in result.stdout and "regression" not in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "gate passed: 1 scenarios, none regressed"


def test_a_failed_gate_says_so_in_words_and_keeps_its_labels_at_80_columns(work: Path) -> None:
    write_workload(work / "dearer.yaml", price=1.6)
    with_scenario(work, "dearer", "dearer.yaml")
    result = run("gate", work / "b.json", env={"COLUMNS": "80"})
    assert result.exit_code == 1
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "gate FAILED: 1 of 2 scenarios regressed (dearer)"  # only the exit code said it before
    assert max(len(line) for line in lines) <= 80
    assert sum("metric" in line and "verdict" in line for line in lines) == 2  # one labelled table each


# -- price changes --------------------------------------------------------------------------------
def test_price_increase_fails_the_right_scenario_and_metric(work: Path) -> None:
    n = committed_gpus(work)
    write_workload(work / "dearer.yaml", price=1.6)
    with_scenario(work, "dearer", "dearer.yaml")
    before = (work / "b.json").read_bytes()
    result = run("gate", work / "b.json", "--json", "--markdown", work / "gate.md")
    report = gate_json(result, 1)
    assert result.stderr.strip().splitlines()[-1] == "error: cost gate failed for dearer"
    assert report["passed"] is False and report["improved"] is False
    steady, dearer = report["scenarios"]
    assert steady["name"] == "w" and steady["verdict"] == "unchanged" and steady["reasons"] == []
    assert all(m["verdict"] == "unchanged" for m in steady["metrics"].values())
    assert dearer["name"] == "dearer" and dearer["verdict"] == "regression"
    assert dearer["best_before"] == dearer["best_after"] == "agg"
    assert dearer["gpus_before"] == dearer["gpus_after"] == {"h100-sxm": n}
    cost = dearer["metrics"]["cost_usd_per_hour"]
    assert cost["verdict"] == "regression"
    assert cost["before"] == pytest.approx(n * PROFILE_PRICE)
    assert cost["after"] == pytest.approx(n * 1.6)
    assert cost["change"] == pytest.approx(1.6 / PROFILE_PRICE - 1, rel=1e-6)
    bcr = dearer["metrics"]["bcr"]
    assert bcr["verdict"] == "regression"
    assert bcr["change"] == pytest.approx(PROFILE_PRICE / 1.6 - 1, rel=1e-5)
    assert dearer["metrics"]["goodput_rps"]["verdict"] == "unchanged"
    assert any(r.startswith("cost_usd_per_hour ") and "+16.79%" in r for r in dearer["reasons"])
    assert any(r.startswith("bcr ") for r in dearer["reasons"])
    assert (work / "b.json").read_bytes() == before  # a failing gate never touches the baseline

    markdown = (work / "gate.md").read_text()
    assert markdown.startswith("## pddplan cost gate: **failed**")
    rows = table_rows(markdown)
    assert rows[("dearer", "cost_usd_per_hour")] == [g4(n * PROFILE_PRICE), g4(n * 1.6), "+16.79%", "❌ regression"]
    assert rows[("dearer", "bcr")][2].startswith("-14.")
    assert rows[("dearer", "bcr")][3] == "❌ regression"
    assert rows[("w", "cost_usd_per_hour")] == [g4(n * PROFILE_PRICE), g4(n * PROFILE_PRICE), "+0.00%", "= unchanged"]
    assert "Regressions:" in markdown
    reason = f"- **dearer**: cost_usd_per_hour {g4(n * PROFILE_PRICE)} -> {g4(n * 1.6)} (+16.79%, tolerance 1.00%)"
    assert reason in markdown
    assert "**w**" not in markdown


def test_price_cut_passes_and_asks_for_a_refresh(work: Path) -> None:
    n = committed_gpus(work)
    write_workload(work / "w.yaml", price=1.2)
    result = run("gate", work / "b.json", "--json", "--markdown", work / "gate.md")
    report = gate_json(result, 0)
    assert report["passed"] is True and report["improved"] is True
    (scenario,) = report["scenarios"]
    assert scenario["verdict"] == "improvement" and scenario["reasons"] == []
    assert scenario["metrics"]["cost_usd_per_hour"]["verdict"] == "improvement"
    assert scenario["metrics"]["cost_usd_per_hour"]["after"] == pytest.approx(n * 1.2)
    assert scenario["metrics"]["bcr"]["verdict"] == "improvement"
    assert "refresh the baseline" in result.stderr
    assert f"pddplan gate {work / 'b.json'} --update" in result.stderr
    assert "error:" not in result.stderr
    markdown = (work / "gate.md").read_text()
    assert markdown.startswith("## pddplan cost gate: passed")
    assert table_rows(markdown)[("w", "cost_usd_per_hour")][3] == "✅ improvement"
    assert "refresh the baseline with `pddplan gate BASELINE --update`" in markdown


def table_rows(markdown: str) -> dict[tuple[str, str], list[str]]:
    """(scenario, metric) -> [before, after, change, verdict] from the markdown table."""
    lines = markdown.splitlines()
    header = lines.index("| scenario | metric | before | after | change | verdict |")
    assert lines[header + 1] == "|---|---|---:|---:|---:|---|"
    rows: dict[tuple[str, str], list[str]] = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6, line
        assert (cells[0], cells[1]) not in rows
        rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_markdown_has_a_row_per_scenario_and_metric(work: Path) -> None:
    n = committed_gpus(work)
    write_workload(work / "cheaper.yaml", price=1.0)
    with_scenario(work, "cheaper", "cheaper.yaml")
    result = run("gate", work / "b.json", "--markdown", work / "pr.md")
    assert result.exit_code == 0, result.stderr
    rows = table_rows((work / "pr.md").read_text())
    assert list(rows) == [(s, m) for s in ("w", "cheaper") for m in ("cost_usd_per_hour", "bcr", "goodput_rps")]
    assert rows[("cheaper", "cost_usd_per_hour")] == [g4(n * PROFILE_PRICE), g4(n * 1.0), "-27.01%", "✅ improvement"]
    assert rows[("cheaper", "goodput_rps")] == ["20", "20", "+0.00%", "= unchanged"]
    assert rows[("w", "bcr")][2:] == ["+0.00%", "= unchanged"]
    # the terminal table says the same thing
    assert "improvement" in result.stdout and "unchanged" in result.stdout


def test_no_feasible_plan_any_more_is_a_regression(work: Path) -> None:
    write_workload(work / "w.yaml", sla={"ttft_p90_s": 5.0, "ttft_p99_s": 10.0, "tpot_p90_s": 0.001})
    result = run("gate", work / "b.json", "--json")
    report = gate_json(result, 1)
    (scenario,) = report["scenarios"]
    assert scenario["verdict"] == "regression"
    assert scenario["best_after"] is None and scenario["gpus_after"] == {}
    assert scenario["reasons"] == ["no feasible plan meets the SLA any more"]
    assert scenario["metrics"]["cost_usd_per_hour"] == {
        "before": pytest.approx(committed_gpus(work) * PROFILE_PRICE),
        "after": None,
        "change": None,
        "verdict": "regression",
    }
    assert "error: cost gate failed for w" in result.stderr


# -- corrupt or missing baselines -----------------------------------------------------------------
def _valid() -> dict[str, Any]:
    return {
        "version": 1,
        "scenarios": [
            {
                "name": "w",
                "workload": "w.yaml",
                "options": {"architectures": ["pd-intra"], "requests": 500},
                "result": {
                    "best": "pd-intra",
                    "feasible": True,
                    "cost_usd_per_hour": 21.92,
                    "bcr": 3284.67,
                    "goodput_rps": 20.0,
                },
            }
        ],
    }


def _edit(change: Any) -> str:
    data = _valid()
    change(data)
    return json.dumps(data)


CORRUPT = {
    "invalid-json": ('{"version": 1, "scenarios": [', ("not valid JSON", "line 1")),
    "truncated": (json.dumps(_valid())[:-7], ("not valid JSON",)),
    "empty-file": ("", ("not valid JSON",)),
    "top-level-list": ("[]", ("expected a mapping",)),
    "wrong-type-rtol": (
        _edit(lambda d: d.update(tolerances={"rtol": "one percent"})),
        ("tolerances.rtol",),
    ),
    "wrong-type-scenarios": (_edit(lambda d: d.update(scenarios={"w": {}})), ("scenarios",)),
    "wrong-type-cost": (
        _edit(lambda d: d["scenarios"][0]["result"].update(cost_usd_per_hour="cheap")),
        ("scenarios[0].result.cost_usd_per_hour",),
    ),
    "unknown-key": (_edit(lambda d: d.update(tolerance={"rtol": 0.1})), ("tolerance", "unknown field")),
    "unknown-nested-key": (
        _edit(lambda d: d["scenarios"][0]["options"].update(request=500)),
        ("scenarios[0].options.request", "unknown field"),
    ),
    "unknown-metric": (
        _edit(lambda d: d.update(tolerances={"per_metric": {"latency": 0.1}})),
        ("tolerances.per_metric",),
    ),
    "wrong-version": (_edit(lambda d: d.update(version=2)), ("version",)),
    "no-scenarios": (_edit(lambda d: d.update(scenarios=[])), ("scenarios",)),
    "missing-result": (_edit(lambda d: d["scenarios"][0].pop("result")), ("result", "required")),
    "feasible-without-figures": (
        _edit(lambda d: d["scenarios"][0]["result"].update(cost_usd_per_hour=None, bcr=None)),
        ("a feasible result needs", "cost_usd_per_hour"),
    ),
    "infeasible-not-allowed": (
        _edit(lambda d: d["scenarios"][0].update(result={"best": None, "feasible": False})),
        ("recorded infeasible", "--allow-infeasible"),
    ),
    "free-plan": (
        _edit(lambda d: d["scenarios"][0]["result"].update(cost_usd_per_hour=0.0)),
        ("costs more than $0/h",),
    ),
    "infinite-cost": (
        json.dumps(_valid()).replace('"cost_usd_per_hour": 21.92', '"cost_usd_per_hour": Infinity'),
        ("cost_usd_per_hour",),
    ),
    "repeated-names": (
        _edit(lambda d: d["scenarios"].append(d["scenarios"][0])),
        ("repeat",),
    ),
    "rate-mode-without-rate": (
        _edit(lambda d: d["scenarios"][0]["options"].update(mode="rate")),
        ("rate_rps",),
    ),
    "negative-tolerance": (_edit(lambda d: d.update(tolerances={"rtol": -0.1})), ("tolerances.rtol",)),
    "nan-tolerance": (_edit(lambda d: d.update(tolerances={"rtol": float("nan")})), ("tolerances.rtol",)),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupt_baseline_exits_2(work: Path, case: str) -> None:
    text, fragments = CORRUPT[case]
    (work / "b.json").write_text(text)
    one_error_line(run("gate", work / "b.json", "--json"), str(work / "b.json"), *fragments)
    assert (work / "b.json").read_text() == text


def test_missing_baseline_exits_2(tmp_path: Path) -> None:
    line = one_error_line(run("gate", tmp_path / "nope.json"), "baseline not found")
    assert str(tmp_path / "nope.json") in line
    assert "--init" in line


def test_missing_baseline_with_update_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    one_error_line(run("gate", tmp_path / "nope.json", "--update"), "baseline not found")
    assert list(tmp_path.iterdir()) == []


def test_baseline_is_a_directory_exits_2(tmp_path: Path) -> None:
    (tmp_path / "b.json").mkdir()
    one_error_line(run("gate", tmp_path / "b.json"), "directory")


def test_scenario_with_missing_workload_exits_2(work: Path) -> None:
    data = baseline_json(work)
    data["scenarios"][0]["workload"] = "gone.yaml"
    save_baseline(work, data)
    one_error_line(run("gate", work / "b.json", "--json"), "gone.yaml", "not found")


def test_scenario_with_invalid_workload_exits_2(work: Path) -> None:
    (work / "w.yaml").write_text("name: w\nmodel: [unclosed\n")
    one_error_line(run("gate", work / "b.json"), "w.yaml", "not valid YAML")


def test_scenarios_of_the_same_architectures_share_one_pool_and_a_crash_names_them(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three scenarios, two comparing agg and one pd-intra: two pooled runs, each given its
    scenarios' requests in baseline order; a crash in a pool is exit 2 naming its scenarios."""
    with_scenario(work, "second", "w.yaml")
    with_scenario(work, "third", "w.yaml")
    data = baseline_json(work)
    data["scenarios"][1]["options"]["architectures"] = ["pd-intra"]
    save_baseline(work, data)
    calls: list[tuple[int, tuple[str, ...] | None]] = []

    def pooled(requests: list[Any], names: Any, progress: Any = None) -> list[Any]:
        calls.append((len(requests), names))
        raise RuntimeError("a worker died\nwith a traceback")

    monkeypatch.setattr(gating, "optimize_each", pooled)
    with pytest.raises(InputError, match=r"scenarios 'w', 'third' crashed: RuntimeError: a worker died$"):
        gating.gate(work / "b.json")
    assert calls == [(2, ("agg",))]  # the first group, which crashed
    calls.clear()

    def counted(requests: list[Any], names: Any, progress: Any = None) -> list[Any]:
        calls.append((len(requests), names))
        return [None] * len(requests)

    monkeypatch.setattr(gating, "optimize_each", counted)
    monkeypatch.setattr(gating, "result_of", lambda report: ScenarioResult(best=None, feasible=False))
    gating.gate(work / "b.json")
    assert calls == [(2, ("agg",)), (1, ("pd-intra",))]


def test_scenario_with_unknown_shipped_workload_name_exits_2(work: Path) -> None:
    data = baseline_json(work)
    data["scenarios"][0]["workload"] = "no-such-workload"
    save_baseline(work, data)
    one_error_line(run("gate", work / "b.json"), "no-such-workload")


# -- --update -------------------------------------------------------------------------------------
def test_update_rewrites_the_baseline_then_the_gate_passes_unchanged(work: Path) -> None:
    n = committed_gpus(work)
    write_workload(work / "w.yaml", price=1.6)
    committed = baseline_json(work)
    refused = run("gate", work / "b.json", "--update")  # a regression, not accepted: exit 1, nothing written
    assert refused.exit_code == 1, refused.stderr
    assert "regressions in w" in refused.stderr and "not updated; pass --accept" in refused.stderr
    assert baseline_json(work) == committed  # so the next gate fails again rather than passing
    assert run("gate", work / "b.json").exit_code == 1
    updated = run("gate", work / "b.json", "--update", "--accept")
    assert updated.exit_code == 0, updated.stderr
    assert "pddplan cost gate" in updated.stdout
    assert f"updated {work / 'b.json'}" in " ".join(updated.stderr.split())
    data = baseline_json(work)
    assert data["tolerances"] == committed["tolerances"]
    assert data["scenarios"][0]["options"] == committed["scenarios"][0]["options"]
    assert data["scenarios"][0]["workload"] == "w.yaml"
    assert data["scenarios"][0]["result"]["cost_usd_per_hour"] == pytest.approx(n * 1.6)
    assert data["scenarios"][0]["result"]["gpus"] == {"h100-sxm": n}
    Baseline.model_validate(data)
    assert not [p.name for p in work.iterdir() if p.name.endswith(".tmp")]

    again = run("gate", work / "b.json", "--json")
    report = gate_json(again, 0)
    assert report == {**report, "passed": True, "improved": False}
    assert report["scenarios"][0]["verdict"] == "unchanged"
    assert {m["verdict"] for m in report["scenarios"][0]["metrics"].values()} == {"unchanged"}
    assert "refresh" not in again.stderr


def test_update_keeps_the_committed_tolerances(work: Path) -> None:
    """--rtol/--tol tune one run; --update rewrites the results, not the committed tolerances."""
    data = baseline_json(work)
    data["tolerances"] = {"rtol": 0.02, "per_metric": {"bcr": 0.03}}
    save_baseline(work, data)
    result = run("gate", work / "b.json", "--update", "--rtol", "0.5", "--tol", "cost_per_hour=0.4")
    assert result.exit_code == 0, result.stderr
    assert baseline_json(work)["tolerances"] == {"rtol": 0.02, "per_metric": {"bcr": 0.03}}


class Interrupted(KeyboardInterrupt):
    pass


def _failing_replace(monkeypatch: pytest.MonkeyPatch, target: Path, error: BaseException) -> list[Path]:
    """Make os.replace raise `error` when it would replace `target`; record the temporary files."""
    real = os.replace
    seen: list[Path] = []

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(dst).resolve() == target.resolve():
            seen.append(Path(src))
            assert Path(src).exists()  # the new text was written beside the old file first
            raise error
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_update_interrupted_by_ctrl_c_leaves_the_old_file_whole(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_workload(work / "w.yaml", price=1.6)
    old = (work / "b.json").read_bytes()
    names = sorted(p.name for p in work.iterdir())
    seen = _failing_replace(monkeypatch, work / "b.json", Interrupted())
    result = run("gate", work / "b.json", "--update", "--accept")
    assert result.exit_code != 0
    assert len(seen) == 1
    assert (work / "b.json").read_bytes() == old
    assert sorted(p.name for p in work.iterdir()) == names
    assert not seen[0].exists()


def test_update_failing_to_write_exits_2_and_leaves_the_old_file_whole(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_workload(work / "w.yaml", price=1.6)
    old = (work / "b.json").read_bytes()
    names = sorted(p.name for p in work.iterdir())
    seen = _failing_replace(monkeypatch, work / "b.json", OSError(28, "No space left on device"))
    result = run("gate", work / "b.json", "--update", "--accept")
    assert result.exit_code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot write" in errors[0] and "No space left on device" in errors[0]
    assert result.stderr.strip().splitlines()[-1] == errors[0]
    assert "updated" not in result.stderr
    assert len(seen) == 1
    assert (work / "b.json").read_bytes() == old
    assert sorted(p.name for p in work.iterdir()) == names


@pytest.mark.parametrize("error", [Interrupted(), OSError(5, "Input/output error")])
def test_write_baseline_interrupted_mid_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_mid_write: Any, error: BaseException
) -> None:
    """Interrupted while the temporary file is half written: the old baseline is intact, no
    temporary file is left."""
    path = tmp_path / "b.json"
    old = Baseline.model_validate(_valid())
    gating.write_baseline(path, old)
    old_bytes = path.read_bytes()
    fail_mid_write(error)
    new = old.model_copy(update={"tolerances": Tolerances(rtol=0.5)})
    with pytest.raises(KeyboardInterrupt if isinstance(error, KeyboardInterrupt) else InputError):
        gating.write_baseline(path, new)
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


def test_write_baseline_round_trips(tmp_path: Path) -> None:
    baseline = Baseline.model_validate(_valid())
    gating.write_baseline(tmp_path / "b.json", baseline)
    text = (tmp_path / "b.json").read_text()
    assert text.endswith("}\n")
    assert gating.load_baseline(tmp_path / "b.json") == baseline
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


# -- tolerances -----------------------------------------------------------------------------------
@pytest.fixture()
def small_increase(work: Path) -> Path:
    """A 2.2% price rise: beyond the default 1%, within 5%."""
    write_workload(work / "w.yaml", price=1.40)
    return work


def test_small_increase_fails_at_the_default_tolerance(small_increase: Path) -> None:
    report = gate_json(run("gate", small_increase / "b.json", "--json"), 1)
    metrics = report["scenarios"][0]["metrics"]
    assert metrics["cost_usd_per_hour"]["change"] == pytest.approx(1.40 / PROFILE_PRICE - 1, rel=1e-6)
    assert metrics["cost_usd_per_hour"]["verdict"] == "regression"


def test_rtol_lets_a_small_increase_pass(small_increase: Path) -> None:
    result = run("gate", small_increase / "b.json", "--json", "--rtol", "0.05")
    report = gate_json(result, 0)
    assert report["passed"] is True and report["improved"] is False
    (scenario,) = report["scenarios"]
    assert scenario["verdict"] == "unchanged"
    assert scenario["metrics"]["cost_usd_per_hour"]["verdict"] == "unchanged"
    assert scenario["metrics"]["bcr"]["verdict"] == "unchanged"


def test_tol_per_metric(small_increase: Path) -> None:
    # cost_usd_per_hour is let through, BCR (same relative move, default 1%) still fails
    only_cost = gate_json(run("gate", small_increase / "b.json", "--json", "--tol", "cost_usd_per_hour=0.5"), 1)
    metrics = only_cost["scenarios"][0]["metrics"]
    assert metrics["cost_usd_per_hour"]["verdict"] == "unchanged"
    assert metrics["bcr"]["verdict"] == "regression"
    assert [r.split()[0] for r in only_cost["scenarios"][0]["reasons"]] == ["bcr"]
    both = run("gate", small_increase / "b.json", "--json", "--tol", "cost_usd_per_hour=0.5", "--tol", "bcr=0.05")
    assert gate_json(both, 0)["scenarios"][0]["verdict"] == "unchanged"


def test_tolerances_committed_in_the_baseline_apply(small_increase: Path) -> None:
    data = baseline_json(small_increase)
    data["tolerances"] = {"rtol": 0.01, "per_metric": {"cost_usd_per_hour": 0.5, "bcr": 0.05}}
    save_baseline(small_increase, data)
    assert gate_json(run("gate", small_increase / "b.json", "--json"), 0)["passed"] is True
    # a command-line tolerance overrides the committed one
    tight = gate_json(run("gate", small_increase / "b.json", "--json", "--tol", "cost_usd_per_hour=0.001"), 1)
    assert tight["scenarios"][0]["metrics"]["cost_usd_per_hour"]["verdict"] == "regression"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--tol", "cost_usd_per_hour"), "METRIC=NUMBER"),
        (("--tol", "cost_usd_per_hour=abc"), "METRIC=NUMBER"),
        (("--tol", "cost_per_hour="), "METRIC=NUMBER"),
        (("--tol", "=0.5"), "metric must be"),
        (("--tol", "cost=0.5"), "metric must be"),
        (("--tol", "latency_p99=0.5"), "metric must be"),
        (("--tol", "bcr=-0.1"), "from 0 to 10"),
        (("--tol", "bcr=0.1", "--tol", "goodput:0.1"), "metric must be"),
        (("--rtol", "-0.01"), "from 0 to 10"),
        (("--rtol", "1e300"), "from 0 to 10"),  # accepted: a gate that let every change through
        (("--accept",), "--accept goes with --update"),  # ignored silently
    ],
)
def test_bad_tolerance_exits_2(work: Path, args: tuple[str, ...], fragment: str) -> None:
    one_error_line(run("gate", work / "b.json", *args), fragment)


@pytest.mark.parametrize("args", [("--rtol", "nan"), ("--tol", "cost_per_hour=nan"), ("--tol", "bcr=NaN")])
def test_nan_tolerance_is_rejected(work: Path, args: tuple[str, ...]) -> None:
    """A NaN tolerance would make every comparison false, so no change could ever fail the gate."""
    write_workload(work / "w.yaml", price=1.6)
    one_error_line(run("gate", work / "b.json", *args))


def test_rtol_not_a_number_exits_2(work: Path) -> None:
    result = run("gate", work / "b.json", "--rtol", "lots")
    assert result.exit_code == 2
    assert result.stdout == ""


# -- compare (a pure function) --------------------------------------------------------------------
def result(
    cost: float | None, bcr: float | None, goodput: float | None = 10.0, feasible: bool = True
) -> ScenarioResult:
    if not feasible:
        return ScenarioResult(best=None, feasible=False)
    return ScenarioResult(best="pdd", feasible=True, cost_usd_per_hour=cost, bcr=bcr, goodput_rps=goodput)


def tolerances(rtol: float = 0.25, **per_metric: float) -> Baseline:
    scenario = GateScenario(name="s", workload="w.yaml", result=result(1.0, 1.0))
    return Baseline(tolerances=Tolerances(rtol=rtol, per_metric=per_metric), scenarios=[scenario])  # type: ignore[arg-type]


def verdicts(check: gating.ScenarioCheck) -> dict[str, str]:
    return {metric: m.verdict for metric, m in check.metrics.items()}


@pytest.mark.parametrize(
    ("cost_after", "verdict"),
    [(4.0, "unchanged"), (5.0, "unchanged"), (5.000001, "regression"), (3.0, "unchanged"), (2.999999, "improvement")],
)
def test_compare_cost_at_the_tolerance_boundary(cost_after: float, verdict: str) -> None:
    check = gating.compare("s", result(4.0, 8.0), result(cost_after, 8.0), tolerances(0.25))
    assert verdicts(check)["cost_usd_per_hour"] == verdict
    assert verdicts(check)["bcr"] == "unchanged"
    assert check.verdict == verdict
    cost = check.metrics["cost_usd_per_hour"]
    assert (cost.before, cost.after) == (4.0, cost_after)
    assert cost.change == pytest.approx(cost_after / 4.0 - 1)
    assert bool(check.reasons) == (verdict == "regression")


@pytest.mark.parametrize(
    ("bcr_after", "verdict"),
    [(8.0, "unchanged"), (6.0, "unchanged"), (5.999999, "regression"), (10.0, "unchanged"), (10.000001, "improvement")],
)
def test_compare_bcr_at_the_tolerance_boundary(bcr_after: float, verdict: str) -> None:
    check = gating.compare("s", result(4.0, 8.0), result(4.0, bcr_after), tolerances(0.25))
    assert verdicts(check) == {"cost_usd_per_hour": "unchanged", "bcr": verdict, "goodput_rps": "unchanged"}
    assert check.verdict == verdict


def test_compare_zero_tolerance() -> None:
    same = gating.compare("s", result(4.0, 8.0), result(4.0, 8.0), tolerances(0.0))
    assert same.verdict == "unchanged" and same.reasons == []
    assert all(m.change == 0.0 for m in same.metrics.values())
    worse = gating.compare("s", result(4.0, 8.0), result(4.0 * (1 + 1e-9), 8.0), tolerances(0.0))
    assert worse.verdict == "regression"


def test_compare_per_metric_tolerance_overrides_rtol() -> None:
    baseline = tolerances(0.01, cost_usd_per_hour=0.5)
    check = gating.compare("s", result(4.0, 8.0), result(5.0, 8.0), baseline)
    assert verdicts(check)["cost_usd_per_hour"] == "unchanged"
    check = gating.compare("s", result(4.0, 8.0), result(4.0, 7.8), baseline)
    assert verdicts(check)["bcr"] == "regression"  # bcr still at rtol 1%


def test_compare_regression_anywhere_wins() -> None:
    check = gating.compare("s", result(4.0, 8.0), result(2.0, 4.0), tolerances(0.25))
    assert verdicts(check) == {"cost_usd_per_hour": "improvement", "bcr": "regression", "goodput_rps": "unchanged"}
    assert check.verdict == "regression"
    assert len(check.reasons) == 1 and check.reasons[0].startswith("bcr 8 -> 4 (-50.00%, tolerance 25.00%)")


def test_compare_reason_text() -> None:
    check = gating.compare("s", result(1000.0, 8.0), result(1500.0, 8.0), tolerances(0.1))
    assert check.reasons == ["cost_usd_per_hour 1,000 -> 1,500 (+50.00%, tolerance 10.00%)"]


def test_compare_goodput_is_reported_but_does_not_gate() -> None:
    check = gating.compare("s", result(4.0, 8.0, 10.0), result(4.0, 8.0, 5.0), tolerances(0.25))
    assert verdicts(check)["goodput_rps"] == "regression"
    assert check.verdict == "unchanged" and check.reasons == []
    check = gating.compare("s", result(4.0, 8.0, 10.0), result(4.0, 8.0, 20.0), tolerances(0.25))
    assert verdicts(check)["goodput_rps"] == "improvement"
    assert check.verdict == "unchanged"


def test_compare_infeasible_after_is_a_regression() -> None:
    check = gating.compare("s", result(4.0, 8.0), result(None, None, feasible=False), tolerances(10.0))
    assert check.verdict == "regression"
    assert check.reasons == ["no feasible plan meets the SLA any more"]
    for m in check.metrics.values():
        assert m.verdict == "regression"
        assert m.after is None and m.change is None
    assert check.after.best is None


def test_compare_feasible_again_is_an_improvement() -> None:
    check = gating.compare("s", result(None, None, feasible=False), result(4.0, 8.0), tolerances())
    assert check.verdict == "improvement"
    assert check.reasons == []
    assert all(m.verdict == "unchanged" and m.before is None for m in check.metrics.values())


def test_compare_infeasible_both_times_is_unchanged() -> None:
    infeasible = result(None, None, feasible=False)
    check = gating.compare("s", infeasible, infeasible, tolerances())
    assert check.verdict == "unchanged" and check.reasons == []


def test_compare_from_zero() -> None:
    check = gating.compare("s", result(0.0, 0.0), result(0.0, 0.0), tolerances())
    assert check.verdict == "unchanged"
    check = gating.compare("s", result(0.0, 0.0), result(1.0, 1.0), tolerances())
    assert verdicts(check)["cost_usd_per_hour"] == "regression"
    assert verdicts(check)["bcr"] == "improvement"
    assert math.isinf(check.metrics["cost_usd_per_hour"].change or 0.0)


# -- views of hand-made checks ---------------------------------------------------------------------
def checks() -> list[gating.ScenarioCheck]:
    baseline = tolerances(0.01)
    return [
        gating.compare("flat", result(4.0, 8.0), result(4.0, 8.0), baseline),
        gating.compare("cheaper", result(4.0, 8.0), result(3.0, 8.0 * 4 / 3), baseline),
        gating.compare("gone", result(4.0, 8.0), result(None, None, feasible=False), baseline),
    ]


def test_outcome_json() -> None:
    view = gating.outcome(checks()).json_data()
    assert view["passed"] is False and view["improved"] is True
    assert [(s["name"], s["verdict"]) for s in view["scenarios"]] == [
        ("flat", "unchanged"),
        ("cheaper", "improvement"),
        ("gone", "regression"),
    ]
    assert view["scenarios"][1]["metrics"]["cost_usd_per_hour"] == {
        "before": 4.0,
        "after": 3.0,
        "change": -0.25,
        "verdict": "improvement",
    }
    json.dumps(view, allow_nan=False)
    ok = gating.outcome(checks()[:1]).json_data()
    assert ok["passed"] is True and ok["improved"] is False


def test_markdown_of_hand_made_checks() -> None:
    text = gate_markdown(checks())
    assert text.startswith("## pddplan cost gate: **failed**\n")
    rows = table_rows(text)
    assert len(rows) == 9
    assert rows[("flat", "bcr")] == ["8", "8", "+0.00%", "= unchanged"]
    assert rows[("cheaper", "cost_usd_per_hour")] == ["4", "3", "-25.00%", "✅ improvement"]
    assert rows[("gone", "cost_usd_per_hour")] == ["4", "-", "-", "❌ regression"]
    assert "- **gone**: no feasible plan meets the SLA any more" in text
    assert "refresh the baseline" in text
    assert gate_markdown(checks()[:1]).startswith("## pddplan cost gate: passed\n")
    assert "Regressions:" not in gate_markdown(checks()[:2])


def test_terminal_table_of_hand_made_checks() -> None:
    console = Console(record=True, width=200, color_system=None)
    print_checks(console, checks())
    text = console.export_text()
    assert "pddplan cost gate" in text
    for name in ("flat", "cheaper", "gone", "pdd -> pdd", "pdd -> no plan"):
        assert name in text
    assert "improvement" in text and "regression" in text and "unchanged" in text
    assert "gone: no feasible plan meets the SLA any more" in text


def test_updated_replaces_results_only() -> None:
    baseline = tolerances(0.07, bcr=0.2)
    check = gating.compare("s", baseline.scenarios[0].result, result(2.0, 3.0), baseline)
    fresh = gating.updated(baseline, [check])
    assert fresh.scenarios[0].result == result(2.0, 3.0)
    assert fresh.tolerances == baseline.tolerances
    assert fresh.scenarios[0].options == baseline.scenarios[0].options


# -- a gate that cannot be fooled -----------------------------------------------------------------
def test_init_refuses_a_workload_with_no_feasible_plan(tmp_path: Path) -> None:
    """--init on a workload no plan can serve used to record `feasible: false`, and every later run
    passed as "unchanged". Now it is refused unless --allow-infeasible records it on purpose."""
    inventory = {"datacenters": [{"name": "dc-a", "gpus": [{"type": "h100-sxm", "max_count": 1}]}]}
    write_workload(tmp_path / "w.yaml", deployment=inventory)
    one_error_line(run("gate", tmp_path / "b.json", "--init", str(tmp_path / "w.yaml")), "no feasible plan")
    assert not (tmp_path / "b.json").exists()
    allowed = run("gate", tmp_path / "b.json", "--init", str(tmp_path / "w.yaml"), "--allow-infeasible")
    assert allowed.exit_code == 0, allowed.stderr
    scenario = baseline_json(tmp_path)["scenarios"][0]
    assert scenario["allow_infeasible"] is True and scenario["result"]["feasible"] is False


def test_update_refuses_to_record_a_scenario_that_became_infeasible(work: Path) -> None:
    committed = baseline_json(work)
    inventory = {"datacenters": [{"name": "dc-a", "gpus": [{"type": "h100-sxm", "max_count": 1}]}]}
    write_workload(work / "w.yaml", deployment=inventory)
    result = run("gate", work / "b.json", "--update", "--accept")
    assert result.exit_code == 2, result.stderr  # after the report of what was re-run
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: scenario 'w' has no feasible plan") and "--allow-infeasible" in last
    assert baseline_json(work) == committed


def test_a_scenario_that_cannot_run_exits_2_with_its_name(work: Path) -> None:
    """Not 1 (a regression) and not 0: a scenario that was not re-run proves nothing."""
    (work / "w.yaml").unlink()
    one_error_line(run("gate", work / "b.json"), "scenario 'w'", "w.yaml")


def test_screen_markdown_and_json_use_the_same_verdict_words() -> None:
    """The JSON said regression/unchanged while the screen said worse/same (issue 16, item 11)."""
    from pddplan.analyses.gate import MARKS
    from pddplan.report.gate_report import STYLE

    assert set(MARKS) == set(STYLE) == {"regression", "improvement", "unchanged"}
    for verdict, styled in STYLE.items():
        assert verdict in styled


def test_baselines_written_before_usd_keys_still_load(work: Path) -> None:
    """A baseline with the old money keys (cost_per_hour, budget_per_hour, per-metric tolerances)
    reads as before; gate writes the new names (cost_usd_per_hour) when it updates it."""
    data = baseline_json(work)
    for scenario in data["scenarios"]:
        scenario["result"]["cost_per_hour"] = scenario["result"].pop("cost_usd_per_hour")
        scenario["options"]["budget_per_hour"] = scenario["options"].pop("budget_usd_per_hour", None)
    data["tolerances"] = {"rtol": 0.01, "per_metric": {"cost_per_hour": 0.02}}
    save_baseline(work, data)
    loaded = Baseline.model_validate(baseline_json(work))
    assert loaded.scenarios[0].result.cost_usd_per_hour == data["scenarios"][0]["result"]["cost_per_hour"]
    assert loaded.tolerances.per_metric == {"cost_usd_per_hour": 0.02}
    result = run("gate", work / "b.json", "--update", "--tol", "cost_per_hour=0.4")
    assert result.exit_code == 0, result.stderr
    rewritten = baseline_json(work)
    assert "cost_usd_per_hour" in rewritten["scenarios"][0]["result"]
    assert "cost_per_hour" not in rewritten["scenarios"][0]["result"]
