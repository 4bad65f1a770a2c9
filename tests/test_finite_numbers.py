"""No NaN or infinity gets into a spec: a `gt=0` bound alone lets `.inf` through, and NaN passes
every comparison (hostile-input audit). Each case exits 2 with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  rate_rps: 4.0\n", "  rate_rps: .inf\n", "arrival.rate_rps = Infinity"),
        ("  drc_retention_s: 60\n", "  drc_retention_s: .nan\n", "serving.drc_retention_s = NaN"),
        ("  ttft_p90_s: 10.0\n", "  ttft_p90_s: -.inf\n", "sla.ttft_p90_s = -Infinity"),
        ("      capacity_gbps: 100\n", "      capacity_gbps: .inf\n", "capacity_gbps = Infinity"),
        ("      usd_per_month: 5200 ", "      usd_per_month: .inf ", "usd_per_month = Infinity"),
        ("  output_usd_per_mtok: 0.42\n", "  output_usd_per_mtok: .inf\n", "prices.output_usd_per_mtok = Infinity"),
    ],
)
def test_workload_numbers_must_be_finite(cli: object, tmp_path: Path, old: str, new: str, field: str) -> None:
    text = (ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / "w.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    line = one_error_line(cli("workloads", "show", str(path)), field)  # type: ignore[operator]
    assert "finite" in line


def test_plan_rate_must_be_finite(cli: object, tmp_path: Path) -> None:
    text = (ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml").read_text(encoding="utf-8")
    path = tmp_path / "p.yaml"
    path.write_text(text + "rate_rps: .inf\n", encoding="utf-8")
    result = cli("evaluate", str(path), "pdd-agent-64k")  # type: ignore[operator]
    one_error_line(result, "rate_rps = Infinity", "finite")
