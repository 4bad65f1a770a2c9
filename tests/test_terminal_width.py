"""Every command's human output at 80 and 100 columns: no line wider than the terminal and no
ellipsis (rich's mark of a cut name or number); a table too wide becomes one record per row and
the deployment drawing stacks its datacenters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pddplan.analyses.agreement import AgreementRow
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
    ("optimize", str(ROOT / "benchmarks" / "fleet-10k.yaml"), "--no-verify", "-a", "pdd", "-a", "pd-intra"),  # FLEET
    ("optimize", "pdd-agent-64k-day", "--robust", "--no-verify", "-a", "pdd", "-a", "pd-intra"),  # DAY
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


#: the fleet's widest cells (five GPU types, four datacenters) come with two architectures as with
#: five; the five side by side are the shipped workloads' cases
FLEET = ("optimize", str(ROOT / "benchmarks" / "fleet-10k.yaml"), "--no-verify", "-a", "pdd", "-a", "pd-intra")
DAY = ("optimize", "pdd-agent-64k-day", "--robust", "--no-verify", "-a", "pdd", "-a", "pd-intra")
#: every command at both widths, but the slowest (the 10,000-GPU fleet, the gate's four optimizes,
#: the day's robust purchase: 15 to 30 s a run) at the narrower one only: their tables are the
#: same kinds the other commands print at both, and what fits 80 columns fits 100
NARROW_ONLY = (FLEET, DAY, ("gate", str(ROOT / "examples" / "ci" / "baseline.json")))
CASES = [(args, columns) for args in COMMANDS for columns in (80, 100) if not (args in NARROW_ONLY and columns == 100)]


def _case_id(value: object) -> str:
    """'optimize benchmarks/fleet-10k.yaml' (paths from the repository root), or the width."""
    if isinstance(value, tuple):
        return " ".join(str(arg).removeprefix(f"{ROOT}/") for arg in value[:2])
    return str(value)


@pytest.mark.parametrize(("args", "columns"), CASES, ids=_case_id)
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
    roles: tuple[str, ...] = ("P   3 x gpu-a (TP16 EP) = 48 GPUs", "RLD 1 x gpu-a (TP16 EP) = 16 GPUs")
    roles += ("MD  2 x gpu-b (TP16 EP) = 32 GPUs",)
    for role in roles:
        assert any(role in line for line in result.stdout.splitlines()), (role, result.stdout)
    stacked = any(line.strip("│ ").startswith("|| 100 Gbps") for line in result.stdout.splitlines())
    assert stacked == (columns == 80)


def test_a_table_too_wide_becomes_records() -> None:
    """hardware list --detail has eleven numeric columns: at 80 columns each GPU is a block of
    field: value (the table's caption kept under them)."""
    out = CliRunner().invoke(app, ["hardware", "list", "--detail"], env={"COLUMNS": "80"}).stdout
    assert "BF16 TFLOPS" in out and "TDP W" in out and "┃" not in out
    wide = CliRunner().invoke(app, ["hardware", "list", "--detail"], env={"COLUMNS": "160"}).stdout
    assert "┃" in wide


def test_a_title_wider_than_its_table_keeps_its_words_whole() -> None:
    """A sweep over a long field path has a narrow table; rich wrapped its title to the table's
    width and broke the path mid-word ('usd_per_gpu_h' / 'our'). Such a title is a line of its own."""
    path = "deployment.datacenters[1].gpus[0].usd_per_gpu_hour"
    args = ["sweep", "pdd-agent-64k", "--param", path, "--values", "2.6,3", "-a", "agg"]
    lines = CliRunner().invoke(app, args, env={"COLUMNS": "80"}).stdout.splitlines()
    assert lines[0] == f"sweep of {path}"
    assert lines[1].startswith("┏")


# -- issue 37, item 5: at 80 columns a long listing is a compact table, and --detail the whole ------
SWEEP: tuple[str, ...] = ("sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "2,4", "-a", "pd-intra")
SWEEP += ("-a", "pd-hetero", "-a", "pd-cross", "-a", "pdd")
#: a few rows of `agreement` (a real run optimizes every shipped workload: twenty seconds and more)
AGREEMENT_ROWS = [
    AgreementRow(workload=workload, architecture=arch, figure=figure, evaluate=e, simulate=s, relative_gap=e / s - 1)
    for workload, arch in (("pdd-agent-64k-hetero", "pd-hetero"), ("chat-short-lowhit", "pdd"))
    for figure, e, s in (
        ("ttft_p50_s", 1.855, 1.376),
        ("ttft_p90_s", 6.371, 4.503),
        ("ttft_p99_s", 12.85, 13.88),
        ("tpot_p90_s", 0.03475, 0.03496),
        ("rld_token_share", 0.01224, 0.005182),
        ("link_utilization", 0.7385, 0.7269),
    )
]
#: per command: what its compact table at 80 columns keeps (a name and its figures, whole, on one
#: line), a figure only --detail shows, and at most how many lines the compact output takes
COMPACT = {
    "hardware list": (("hardware", "list"), ("h100-sxm", "989.4", "1,978.9", "3.35", "450", "1.370"), "10,000.0", 30),
    "models list": (("models", "list"), ("kimi-k2", "mla + MoE", "1,026.4B", "1,029", "70,272"), "36 linear", 30),
    "sweep": (SWEEP, ("4", "218.98", "273.37", "pdd"), "65.76", 40),
    "accuracy": (("accuracy",), ("121", "gpt-oss-120b", "b200", "prefill", "+206%"), "sglang-2025q1", 80),
    "agreement": (("agreement",), ("pdd-agent-64k-hetero", "pd-hetero", "+34.8%", "+41.5%", "-7.4%"), "1.855", 20),
}


def _invoke(args: tuple[str, ...], columns: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    from pddplan.analyses.agreement import AgreementFlags

    monkeypatch.setattr(AgreementFlags, "agreement", lambda self, progress=None: AGREEMENT_ROWS)
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)}, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result


def _fits(out: str, columns: int) -> list[str]:
    lines = out.splitlines()
    assert lines and not [line for line in lines if len(line) > columns], [
        line for line in lines if len(line) > columns
    ]
    assert "…" not in out
    return lines


@pytest.mark.parametrize("name", COMPACT)
def test_at_80_columns_a_long_listing_is_a_compact_table(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`agreement` took 469 lines at 80 columns, `accuracy` 1,119, `hardware list` 177, `models
    list` 113 and `sweep` 43 for two values: every row a block of field: value lines. Now each is
    a table of its key columns, its figures whole on one line, and names --detail for the rest."""
    args, row, detail_only, most_lines = COMPACT[name]
    lines = _fits(_invoke(args, 80, monkeypatch).stdout, 80)
    assert len(lines) <= most_lines, len(lines)
    assert any("┃" in line for line in lines), "not a table"
    first, *figures = row
    line = next(line for line in lines if f" {first} " in line and "┃" not in line)
    for figure in figures:
        assert f" {figure} " in line, (figure, line)
    assert "--detail" in "\n".join(lines)
    assert detail_only not in " ".join(" ".join(lines).split())


@pytest.mark.parametrize("name", COMPACT)
def test_detail_brings_back_every_column(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--detail: the whole table, as records where it does not fit 80 columns, nothing cut."""
    args, _, detail_only, _ = COMPACT[name]
    for columns in (80, 160):
        out = _invoke((*args, "--detail"), columns, monkeypatch).stdout
        _fits(out, columns)
        assert detail_only in " ".join(out.split()), (columns, out[:2000])


def test_a_wide_terminal_keeps_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 160 columns the browsing tables fit whole: nothing is left out, no --detail needed."""
    for args in (("hardware", "list"), ("models", "list")):
        out = _invoke(args, 160, monkeypatch).stdout
        _fits(out, 160)
        assert "--detail" not in out and ("TDP W" in out or "KV dtype" in out)
