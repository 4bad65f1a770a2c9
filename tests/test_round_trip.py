"""The README's round trip, run as written (optimize -> export -> calibrate --from -> optimize),
and the figures the README quotes from it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "examples" / "bench"


def _readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## From plan to cluster and back") : text.index("## The PDD article, reproduced")]


def test_the_readme_round_trip_runs_and_its_figures_hold(cli: Any, tmp_path: Path) -> None:
    for name in ("llama70b-h200.yaml", "llama70b-h200-calibrated.yaml", "sglang-llama70b-h200-tp4.jsonl"):
        shutil.copy(BENCH / name, tmp_path / name)
    plan = tmp_path / "plan.yaml"
    first = cli("optimize", str(tmp_path / "llama70b-h200.yaml"), "-a", "pd-intra", "--output", str(plan), "--json")
    assert first.exit_code == 0, first.stderr
    exported = cli(
        "export",
        str(plan),
        str(tmp_path / "llama70b-h200.yaml"),
        "--target",
        "sglang",
        "--out",
        str(tmp_path / "launch"),
    )
    assert exported.exit_code == 0 and (tmp_path / "launch" / "router.sh").is_file()
    calibrated = cli(
        "calibrate",
        "--from",
        "sglang-bench",
        str(tmp_path / "sglang-llama70b-h200-tp4.jsonl"),
        "--gpu",
        "h200",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "4",
        "--output",
        str(tmp_path / "h200.yaml"),
        "--json",
    )
    assert calibrated.exit_code == 0, calibrated.stderr
    second = cli("optimize", str(tmp_path / "llama70b-h200-calibrated.yaml"), "-a", "pd-intra", "--json")
    assert second.exit_code == 0, second.stderr

    section = _readme_section()
    before, after = (
        next(a for a in json.loads(r.stdout)["architectures"] if a["name"] == "pd-intra") for r in (first, second)
    )
    fit = json.loads(calibrated.stdout)
    plan_data = yaml.safe_load(plan.read_text())
    quoted = re.search(r"is (\d+) prefill \+ (\d+) decode instances of (\d+) x H200,\s+\$([\d.]+)/h", section)
    assert quoted is not None
    assert (plan_data["prefill"]["count"], plan_data["decode"]["count"], plan_data["prefill"]["tp"]) == tuple(
        int(g) for g in quoted.groups()[:3]
    )
    assert f"{before['cost_usd_per_hour']:.2f}" == quoted.group(4)
    assert f"${after['cost_usd_per_hour']:.2f}/h" in section
    assert (
        f"from {fit['before']['fit']['median_abs_error']:.0%} to {fit['after']['fit']['median_abs_error']:.0%}"
        in section
    )
    assert fit["from_bench"]["rows"] == 7 and "7 decode rows" in section
