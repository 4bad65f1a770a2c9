"""`optimize --robustness`: the verdict on hand-made rows, the variations built from a workload, the
table at 80 columns, and one end-to-end run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console

from pddplan.inputs import load_hardware, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.outputs import Robustness, RobustnessRow
from pddplan.optimize.robustness import (
    RobustnessReport,
    variations,
    verdict,
    wider,
)
from pddplan.report import robustness_report
from pddplan.scenarios.variants import extend_widths

AGENT = "pdd-agent-64k"


def _row(label: str, kind: str, change: float | None, subject: bool = True, baseline: bool = True) -> RobustnessRow:
    return RobustnessRow(
        variation=label,
        kind=kind,
        best="pdd" if change is not None and change < 0 else "pd-intra",
        subject_feasible=subject,
        subject_cost_usd_per_hour=100.0 if subject else None,
        best_baseline="pd-intra" if baseline else None,
        best_baseline_cost_usd_per_hour=150.0 if baseline else None,
        cost_change_vs_best_baseline=change,
    )


# -- the verdict ------------------------------------------------------------------------------------
def test_verdict_without_a_flip_gives_the_range() -> None:
    rows = [_row("nominal", "nominal", -0.25), _row("rate x0.5", "rate", -0.12), _row("tp up to 64", "widths", -0.40)]
    assert verdict(rows) == "PDD is cheaper than the best baseline under every variation tried (-12.0% to -40.0%)"


def test_verdict_dearer_everywhere() -> None:
    rows = [_row("nominal", "nominal", 0.551), _row("rate x2", "rate", 0.134)]
    assert verdict(rows) == "PDD is dearer than the best baseline under every variation tried (+13.4% to +55.1%)"


def test_verdict_names_the_variations_that_flip_the_sign() -> None:
    rows = [
        _row("rate x0.5", "rate", 0.08),
        _row("nominal", "nominal", -0.335),
        _row("gpu-b price +10%", "price", -0.2),
        _row("tp up to 64", "widths", 0.55),
    ]
    assert verdict(rows) == (
        "the sign of PDD's gain over the best baseline flips: cheaper at nominal (-33.5%) "
        "but dearer at rate x0.5 (+8.0%) and with tp up to 64 (+55.0%)"
    )


def test_verdict_says_which_variation_had_no_feasible_plan() -> None:
    rows = [
        _row("nominal", "nominal", -0.2),
        _row("rate x2", "rate", None, subject=False),
        _row("tp up to 64", "widths", None, baseline=False),
        _row("rate x0.5", "rate", -0.1),
    ]
    text = verdict(rows)
    assert text.startswith("PDD is cheaper than the best baseline under every variation where both are feasible")
    assert "(-10.0% to -20.0%)" in text
    assert "no feasible PDD plan at rate x2" in text
    assert "no feasible baseline with tp up to 64" in text
    nothing = verdict([_row("nominal", "nominal", None, subject=False, baseline=False)])
    assert nothing.startswith("no variation has both a feasible PDD plan and a feasible baseline")
    assert "neither PDD nor any baseline is feasible at nominal" in nothing


# -- the variations ----------------------------------------------------------------------------------
def test_wider_adds_the_next_two_powers_of_two() -> None:
    assert wider([8, 16]) == [8, 16, 32, 64]
    assert wider([1, 2, 4, 8, 16, 32, 64]) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert wider([8, 12]) == [8, 12, 16, 32]


def test_variations_scale_rate_prices_and_widths_exactly() -> None:
    workload = load_workload(AGENT)
    inputs = load_input_set(workload, workload_dir(AGENT))
    before = workload.model_dump()
    built = {v.label: v for v in variations(inputs, OptimizeOptions(), ["gpu-b"])}
    assert list(built) == [
        "rate x0.5",
        "rate x2",
        "gpu-b price -10%",
        "gpu-b price +10%",
        "tp up to 256",
        "caches in HBM only",
        "caches to DRAM and SSD",
        "retention 30 s",
        "retention 120 s",
        "decode batch cap 256",
    ]
    assert built["caches in HBM only"].workload.serving.cache_tiers == "hbm"
    assert built["retention 120 s"].workload.serving.drc_retention_s == 120.0
    assert built["decode batch cap 256"].workload.serving.max_decode_batch == 256
    assert workload.model_dump() == before  # the nominal workload is untouched
    assert built["rate x0.5"].workload.arrival.rate_rps == 2.0
    assert built["rate x2"].workload.arrival.rate_rps == 8.0
    gpu_b = load_hardware("gpu-b").cost_usd_per_gpu_hour("rental")
    for label, factor in (("gpu-b price -10%", 0.9), ("gpu-b price +10%", 1.1)):
        varied = built[label].workload
        assert varied.arrival == workload.arrival
        for dc, original in zip(varied.deployment.datacenters, workload.deployment.datacenters, strict=True):
            for offer, old in zip(dc.gpus, original.gpus, strict=True):
                if offer.type == "gpu-b":
                    assert offer.usd_per_gpu_hour == pytest.approx(factor * gpu_b, rel=1e-12)
                else:
                    assert offer == old
    assert built["tp up to 256"].workload.deployment.tp_options == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert built["tp up to 256"].workload.deployment.datacenters == workload.deployment.datacenters
    assert all(v.options == OptimizeOptions() for v in built.values())


def test_variations_keep_overrides_and_narrowed_widths() -> None:
    workload = load_workload(AGENT)
    dcs = workload.deployment.datacenters
    priced = [dcs[0], dcs[1].model_copy(update={"gpus": [dcs[1].gpus[0].model_copy(update={"usd_per_gpu_hour": 2.0})]})]
    workload = extend_widths(
        workload.model_copy(update={"deployment": workload.deployment.model_copy(update={"datacenters": priced})}),
        [8, 16],
    )
    inputs = load_input_set(workload, workload_dir(AGENT))
    options = OptimizeOptions(mode="rate", rate=3.0)
    built = {v.label: v for v in variations(inputs, options, ["gpu-b"])}
    assert built["gpu-b price +10%"].workload.deployment.datacenters[1].gpus[0].usd_per_gpu_hour == pytest.approx(
        2.2, rel=1e-12
    )
    assert built["gpu-b price -10%"].workload.deployment.datacenters[0] == dcs[0]
    assert built["tp up to 64"].workload.deployment.tp_options == [8, 16, 32, 64]
    assert built["rate x2"].options.rate == 6.0  # --rate overrides the workload's rate, so it scales too
    assert not [v for v in variations(inputs, options, []) if v.kind == "price"]


# -- the table -------------------------------------------------------------------------------------
def test_table_fits_80_columns_without_cutting() -> None:
    rows = [
        _row("nominal", "nominal", 0.551),
        _row("gpu-b, h200-custom price +10%", "price", -0.335),
        _row("tp up to 256", "widths", None, subject=False),
    ]
    report = RobustnessReport(rows=rows, notes=["GPU price variations skipped: a reason"])
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    robustness_report.print_report(console, report)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for fragment in ("nominal", "gpu-b, h200-custom", "pd-intra 150.00", "100.00", "+55.1%", "-33.5%", "infeasible"):
        assert fragment in text
    again = Robustness.model_validate(json.loads(json.dumps(report.to_output().json_data())))
    assert RobustnessReport.from_output(again).to_output() == report.to_output()


# -- end to end ------------------------------------------------------------------------------------
def test_optimize_robustness_json(cli: Any, root: Any) -> None:
    # PDD and the baseline it meets most often: every variation and check of the table, at half the
    # searches of all five architectures (the README's robustness block runs them all)
    args = ("--robustness", "--json", "--requests", "200", "-a", "pdd", "-a", "pd-intra")
    result = cli("optimize", str(root / "workloads" / f"{AGENT}.yaml"), *args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)  # one document, nothing else
    assert set(data["robustness"]) >= {"rows", "verdict"}
    rows = data["robustness"]["rows"]
    assert [r["variation"] for r in rows] == [
        "nominal",
        "rate x0.5",
        "rate x2",
        "gpu-b price -10%",
        "gpu-b price +10%",
        "tp up to 256",
        "caches in HBM only",
        "caches to DRAM and SSD",
        "retention 30 s",
        "retention 120 s",
        "decode batch cap 256",
    ]
    assert all(reason.split(" (")[0] in {r["variation"] for r in rows} for reason in data["robustness"]["reasons"])
    nominal = rows[0]
    figures = {a["name"]: a for a in data["architectures"]}
    assert nominal["best"] == data["best"]
    assert nominal["subject_cost_usd_per_hour"] == pytest.approx(figures["pdd"]["cost_usd_per_hour"], rel=1e-9)
    assert nominal["subject_bcr"] == pytest.approx(figures["pdd"]["bcr"], rel=1e-9)
    baseline = nominal["best_baseline"]
    assert nominal["best_baseline_cost_usd_per_hour"] == pytest.approx(figures[baseline]["cost_usd_per_hour"], rel=1e-9)
    assert nominal["cost_change_vs_best_baseline"] == pytest.approx(data["gains"][baseline]["cost_change"], rel=1e-9)
    for name, against in nominal["vs_baselines"].items():
        if against["cost_change"] is not None:
            assert against["cost_change"] == pytest.approx(data["gains"][name]["cost_change"], rel=1e-9)
    assert rows[2]["change"] == {"arrival.rate_rps": 8.0}
    # the cheapest plan serving the whole rate costs more when a GPU it uses costs more
    assert (
        rows[4]["subject_cost_usd_per_hour"]
        > nominal["subject_cost_usd_per_hour"]
        > rows[3]["subject_cost_usd_per_hour"]
    )
    assert isinstance(data["robustness"]["verdict"], str) and data["robustness"]["verdict"]
