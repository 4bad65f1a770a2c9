"""Every command's human output at 80 and 100 columns: no line wider than the terminal and no
ellipsis (rich's mark of a cut name or number); a table too wide becomes one record per row and
the deployment drawing stacks its datacenters."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pddplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
PLAN = str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")
COMMANDS = [
    ("architectures",),
    ("hardware", "list"),
    ("hardware", "show", "h200"),
    ("models", "list"),
    ("models", "show", "deepseek-v3.2"),
    ("workloads", "list"),
    ("workloads", "show", "pdd-agent-64k"),
    ("estimate", "--model", "deepseek-v3.2", "--gpu", "gpu-a", "--tp", "16", "--prefill", "8192"),
    ("evaluate", PLAN, "pdd-agent-64k"),
    ("simulate", PLAN, "pdd-agent-64k", "--requests", "2000"),
    ("optimize", "pdd-agent-64k", "--no-verify"),
    ("optimize", str(ROOT / "benchmarks" / "fleet-10k.yaml"), "--no-verify"),  # FLEET
    ("optimize", "pdd-agent-64k-day", "--robust", "--no-verify", "-a", "pdd", "-a", "pd-intra"),
    ("bathtub", "--points", "11"),
    ("sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "2,4"),
    ("accuracy",),
    ("gate", str(ROOT / "examples" / "ci" / "baseline.json")),
    ("trace", "import", str(ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl")),
    (
        "cache-curve",
        str(ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"),
        "--capacity",
        "1Mtok,10Mtok,100Mtok",
    ),
    (
        "estimate",
        "--model",
        "deepseek-v3.2",
        "--gpu",
        "gpu-b",
        "--tp",
        "16",
        "--decode-batch",
        "64",
        "--context",
        "65000",
        "--mtp",
        "1",
        "--accept",
        "0.85",
    ),
]


FLEET = ("optimize", str(ROOT / "benchmarks" / "fleet-10k.yaml"), "--no-verify")
#: every command at both widths, but the 10,000-GPU fleet (a minute and a half per run) at the
#: narrower one only: what fits 80 columns fits 100
CASES = [(args, columns) for args in COMMANDS for columns in (80, 100) if not (args == FLEET and columns == 100)]


@pytest.mark.parametrize(("args", "columns"), CASES, ids=lambda v: " ".join(v[:2]) if isinstance(v, tuple) else str(v))
def test_output_fits_the_terminal_without_cutting_anything(args: tuple[str, ...], columns: int) -> None:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)}, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines
    too_wide = [line for line in lines if len(line) > columns]
    assert not too_wide, too_wide[:3]
    assert "…" not in result.stdout, [line for line in lines if "…" in line][:3]


@pytest.mark.parametrize("columns", [80, 100])
def test_the_deployment_drawing_keeps_each_role_on_one_line(columns: int) -> None:
    """At 80 columns the two datacenters used to sit side by side and wrap into each other."""
    result = CliRunner().invoke(app, ["evaluate", PLAN, "pdd-agent-64k"], env={"COLUMNS": str(columns)})
    roles = ("P   3 x gpu-a (TP16 EP) = 48 GPUs", "RLD 1 x gpu-a (TP16 EP) = 16 GPUs")
    roles += ("MD  2 x gpu-b (TP16 EP) = 32 GPUs",)
    for role in roles:
        assert any(role in line for line in result.stdout.splitlines()), (role, result.stdout)
    stacked = any(line.strip("│ ").startswith("|| 100 Gbps") for line in result.stdout.splitlines())
    assert stacked == (columns == 80)


def test_a_table_too_wide_becomes_records() -> None:
    """hardware list has eleven numeric columns: at 80 columns each GPU is a block of field: value."""
    out = CliRunner().invoke(app, ["hardware", "list"], env={"COLUMNS": "80"}).stdout
    assert "BF16 TFLOPS" in out and "┃" not in out
    wide = CliRunner().invoke(app, ["hardware", "list"], env={"COLUMNS": "160"}).stdout
    assert "┃" in wide
