"""Honest scoring of the step-time model: fitted factors that sit on a bound are reported (and
`calibrate` warns), and `accuracy --folds K` cross-validates the whole refit on the fit rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line

from pddplan.calibration.accuracy import cross_validation
from pddplan.calibration.calibrate import FIT_START, PARAMETERS, factors_on_bounds, read_measurements
from pddplan.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "tests" / "data" / "measurements.csv"


def test_factors_on_bounds_by_hand() -> None:
    assert factors_on_bounds(FIT_START) == []  # the priors: nothing on a bound
    on = FIT_START.model_copy(update={"compute_max_fraction": 0.9, "step_overhead_s": 2e-5})
    assert factors_on_bounds(on) == [("compute_max_fraction", 0.9, "upper"), ("step_overhead_s", 2e-5, "lower")]
    # 1% of the range from a bound counts; 2% does not (memory_fraction spans 0.6-0.95)
    near = FIT_START.model_copy(update={"memory_fraction": 0.6 + 0.003})
    far = FIT_START.model_copy(update={"memory_fraction": 0.6 + 0.007})
    assert factors_on_bounds(near) == [("memory_fraction", 0.603, "lower")]
    assert factors_on_bounds(far) == []
    # a frozen factor is not fitted, so not reported
    assert factors_on_bounds(on, fixed=["compute_max_fraction"]) == [("step_overhead_s", 2e-5, "lower")]
    assert {name for name, _, _ in PARAMETERS} >= {"compute_max_fraction", "step_overhead_s"}
    # structural constants (tile rows) are not fitted, so never reported
    assert "compute_half_tokens" not in {name for name, _, _ in PARAMETERS}


def test_calibrate_warns_about_each_factor_on_a_bound(cli: Any, tmp_path: Path) -> None:
    """Rows 30 times slower than any kernel physics allows drive factors to their bounds."""
    import csv
    import json

    with MEASUREMENTS.open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = [r for r in reader if r["gpu"] == "h100-sxm" and r["split"] == "fit"]
    slow = tmp_path / "slow.csv"
    with slow.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "measured_s": str(30 * float(r["measured_s"]))})
    result = cli("calibrate", str(slow), "--gpu", "h100-sxm", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == len(report["factors_on_bounds"]) >= 1
    for item, line in zip(report["factors_on_bounds"], warnings, strict=True):
        assert line.startswith(f"warning: {item['factor']} = ") and f"its {item['bound']} bound" in line


def small_rows() -> list[Any]:
    """The h200 rows (fit, held-out and excluded): a refit of them takes seconds."""
    return [m for m in read_measurements(MEASUREMENTS) if m.gpu == "h200"]


def test_cross_validation_predicts_each_fit_row_once_from_a_fit_without_it() -> None:
    rows = small_rows()
    fit_rows = sum(m.split == "fit" for m in rows)
    assert fit_rows >= 3
    cv = cross_validation(rows, folds=3).json_data()
    assert cv["folds"] == 3 and cv["overall"]["count"] == fit_rows
    for key in ("median_abs_error", "p90_abs_error", "worst_abs_error"):
        assert np.isfinite(cv["overall"][key]) and cv["overall"][key] >= 0
    assert cv["overall"]["median_abs_error"] <= cv["overall"]["p90_abs_error"] <= cv["overall"]["worst_abs_error"]
    assert sum(group["count"] for group in cv["by_family"].values()) == fit_rows


def test_cross_validation_refuses_too_few_or_too_many_folds() -> None:
    rows = small_rows()
    with pytest.raises(InputError, match="at least 2 folds"):
        cross_validation(rows, folds=1)
    with pytest.raises(InputError, match="more folds than"):
        cross_validation(rows, folds=10_000)


def test_accuracy_folds_flag_is_checked(cli: Any) -> None:
    one_error_line(cli("accuracy", "--folds", "1"), "--folds = 1", "at least 2 folds")


def test_a_measurement_with_several_step_kinds_also_gets_an_all_group() -> None:
    """Engine-step rows of two step kinds: one group per kind and an `engine_step all` group over
    both (count the sum, worst the larger worst); a measurement of one kind has no `all` group."""
    from dataclasses import replace

    from pddplan.calibration.accuracy import _grouped

    rows = [m for m in read_measurements(MEASUREMENTS) if m.measured_kind == "engine_step" and m.split != "excluded"]
    rows += [replace(rows[0], measured_kind="client_ttft")]
    measured = np.array([m.measured_s for m in rows])
    predicted = measured * np.linspace(0.5, 1.5, len(rows))
    groups = _grouped(rows, predicted, measured, np.ones(len(rows), dtype=bool)).json_data()["by_measurement"]
    prefill, decode, every = groups["engine_step prefill"], groups["engine_step decode"], groups["engine_step all"]
    assert every["count"] == prefill["count"] + decode["count"] == len(rows) - 1
    assert every["worst_abs_error"] == max(prefill["worst_abs_error"], decode["worst_abs_error"])
    assert "client_ttft prefill" in groups and "client_ttft all" not in groups


def test_the_shipped_model_meets_the_engine_step_targets_on_held_out_rows() -> None:
    """Step-time model v2's targets on engine-step rows held out of every fit (README, "Accuracy of
    the step-time model"): median |error| <= 10%, p90 <= 25%, worst <= 40%, with the shipped factors."""
    from pddplan.calibration.accuracy import accuracy_report

    engine = accuracy_report(MEASUREMENTS).json_data()["holdout_groups"]["by_measurement"]["engine_step prefill"]
    assert engine["count"] >= 5
    assert engine["median_abs_error"] <= 0.10
    assert engine["p90_abs_error"] <= 0.25
    assert engine["worst_abs_error"] <= 0.40


def test_five_fold_cross_validation_meets_the_engine_step_targets_within_five_points() -> None:
    """The same targets 5 points looser on the fit rows' engine steps, each predicted by a refit
    without its fold (`accuracy --folds 5`): median <= 15%, p90 <= 30%, worst <= 45%."""
    engine = cross_validation(read_measurements(MEASUREMENTS), folds=5).json_data()["by_measurement"]["engine_step all"]
    assert engine["count"] >= 9
    assert engine["median_abs_error"] <= 0.15
    assert engine["p90_abs_error"] <= 0.30
    assert engine["worst_abs_error"] <= 0.45


def test_no_shipped_factor_sits_on_a_bound() -> None:
    """Every efficiency block the catalog ships (each GPU's and each of its stacks') keeps its
    factors off their bounds (docs/model.md, "Factors on their bounds"): none needs a why."""
    from pddplan.inputs import load_hardware

    blocks = 0
    for path in sorted((ROOT / "hardware_profiles").glob("*.yaml")):
        profile = load_hardware(path.stem)
        for where, block in [("efficiency", profile.efficiency), *profile.stack_efficiency.items()]:
            if block is None:
                continue
            blocks += 1
            assert factors_on_bounds(block) == [], (path.name, where)
    assert blocks >= 20
