"""The deploy and trace commands as library calls (`EvaluateFlags`, `SimulateFlags`, `ExportFlags`,
`WhatifFlags`, `SurviveFlags`, `TraceImportFlags`, `CacheCurveFlags`, `CachePlanFlags`): a library
caller gets the errors the command line prints, word for word, and the figures its --json prints."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line

from pddplan.analyses.cache_plan import CachePlanFlags
from pddplan.analyses.whatif import WhatifFlags
from pddplan.errors import InputError
from pddplan.evaluate.command import EvaluateFlags
from pddplan.export.command import ExportFlags
from pddplan.optimize.survive import SurviveFlags
from pddplan.simulate.command import SimulateFlags
from pddplan.trace.command import CacheCurveFlags, TraceImportFlags

ROOT = Path(__file__).resolve().parent.parent
PLAN = str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")
TRACE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"
WORKLOAD = "pdd-agent-64k"


def library_error(call: Callable[[], Any]) -> str:
    """The one-line error the command line prints for the InputError `call` raises."""
    with pytest.raises(InputError) as caught:
        call()
    return f"error: {caught.value}"


CASES: dict[str, tuple[Callable[[], Any], list[str]]] = {
    "evaluate rate": (
        lambda: EvaluateFlags(PLAN, WORKLOAD, rate=-1.0),
        ["evaluate", PLAN, WORKLOAD, "--rate", "-1"],
    ),
    "evaluate cache without trace": (
        lambda: EvaluateFlags(PLAN, WORKLOAD, cache_capacity="1TB").evaluate(),
        ["evaluate", PLAN, WORKLOAD, "--cache-capacity", "1TB"],
    ),
    "evaluate trace format": (
        lambda: EvaluateFlags(PLAN, WORKLOAD, trace=TRACE, trace_format="azure").evaluate(),
        ["evaluate", PLAN, WORKLOAD, "--trace", str(TRACE), "--trace-format", "azure"],
    ),
    "simulate requests": (
        lambda: SimulateFlags(PLAN, WORKLOAD, requests=0),
        ["simulate", PLAN, WORKLOAD, "--requests", "0"],
    ),
    "simulate records": (
        lambda: SimulateFlags(PLAN, WORKLOAD, per_request=Path("records.parquet")),
        ["simulate", PLAN, WORKLOAD, "--per-request", "records.parquet"],
    ),
    "simulate one capacity": (
        lambda: SimulateFlags(PLAN, WORKLOAD, trace=TRACE, cache_capacity="1TB,2TB").prepare(),
        ["simulate", PLAN, WORKLOAD, "--trace", str(TRACE), "--cache-capacity", "1TB,2TB"],
    ),
    "export target": (
        lambda: ExportFlags(PLAN, WORKLOAD, "helm").export(),
        ["export", PLAN, WORKLOAD, "--target", "helm"],
    ),
    "whatif no change": (lambda: WhatifFlags(PLAN, WORKLOAD), ["whatif", PLAN, WORKLOAD]),
    "whatif transient": (
        lambda: WhatifFlags(PLAN, WORKLOAD, fail="line:x", at_s=5.0),
        ["whatif", PLAN, WORKLOAD, "--fail", "line:x", "--at", "5"],
    ),
    "survive degraded sla": (
        lambda: SurviveFlags(PLAN, WORKLOAD, degraded_sla=0.5),
        ["survive", PLAN, WORKLOAD, "--degraded-sla", "0.5"],
    ),
    "trace import format": (
        lambda: TraceImportFlags(TRACE, fmt="parquet"),
        ["trace", "import", str(TRACE), "--format", "parquet"],
    ),
    "trace import like": (
        lambda: TraceImportFlags(TRACE, workload_out=Path("w.yaml")),
        ["trace", "import", str(TRACE), "--workload-out", "w.yaml"],
    ),
    "cache-curve routing": (
        lambda: CacheCurveFlags(TRACE, capacity="1Mtok", routing="random"),
        ["cache-curve", str(TRACE), "--capacity", "1Mtok", "--routing", "random"],
    ),
    "cache-curve both": (
        lambda: CacheCurveFlags(TRACE, capacity="1Mtok", tier=["hbm:1Mtok"]).sizes(),
        ["cache-curve", str(TRACE), "--capacity", "1Mtok", "--tier", "hbm:1Mtok"],
    ),
    "cache-curve tier without model": (
        lambda: CacheCurveFlags(TRACE, tier=["hbm:1Mtok"]).sizes(),
        ["cache-curve", str(TRACE), "--tier", "hbm:1Mtok"],
    ),
    "cache-plan format": (
        lambda: CachePlanFlags(TRACE, WORKLOAD, "0", fmt="azure"),
        ["cache-plan", str(TRACE), "--like", WORKLOAD, "--capacity", "0", "--format", "azure"],
    ),
    "cache-plan unknown architecture": (  # was a KeyError traceback
        lambda: CachePlanFlags(TRACE, WORKLOAD, "0", architecture=["nope"], usd_per_gb_month=2.0),
        ["cache-plan", str(TRACE), "--like", WORKLOAD, "--capacity", "0", "-a", "nope", "--usd-per-gb-month", "2"],
    ),
    "cache-curve ambiguous size": (  # 10G read as 10 billion tokens before
        lambda: CacheCurveFlags(TRACE, capacity="10G").sizes(),
        ["cache-curve", str(TRACE), "--capacity", "10G"],
    ),
    "cache-plan price": (
        lambda: CachePlanFlags(TRACE, WORKLOAD, "0").request(),
        ["cache-plan", str(TRACE), "--like", WORKLOAD, "--capacity", "0"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_library_caller_gets_the_command_lines_error(cli: Any, name: str) -> None:
    call, args = CASES[name]
    assert library_error(call) == one_error_line(cli(*args))


def test_evaluate_flags_give_the_figures_evaluate_prints(cli: Any) -> None:
    _, figures = EvaluateFlags(PLAN, WORKLOAD).evaluate()
    assert json.loads(json.dumps(figures.json_data())) == json_of(cli("evaluate", PLAN, WORKLOAD, "--json"))


def test_simulate_flags_replay_the_traces_first_requests(cli: Any, tmp_path: Path) -> None:
    flags = SimulateFlags(PLAN, WORKLOAD, requests=150, trace=TRACE, per_request=tmp_path / "records.csv")
    run = flags.prepare()
    assert (run.requests, run.source) == (150, "simulated, 150 requests, seed 0")
    summary = flags.simulate(run).summary.json_data()
    assert len((tmp_path / "records.csv").read_text().splitlines()) == 151  # the header, then one per request
    from_cli = json_of(cli("simulate", PLAN, WORKLOAD, "--trace", str(TRACE), "--requests", "150", "--json"))
    assert json.loads(json.dumps(summary)) == from_cli


def test_trace_import_flags_write_the_workload_the_command_writes(cli: Any, tmp_path: Path) -> None:
    flags = TraceImportFlags(TRACE, workload_out=tmp_path / "traced.yaml", like=WORKLOAD)
    assert flags.summary().json_data() == json_of(cli("trace", "import", str(TRACE), "--json"))
    assert flags.write_workload() == tmp_path / "traced.yaml"
    written = (tmp_path / "traced.yaml").read_text()
    (tmp_path / "traced.yaml").unlink()
    result = cli("trace", "import", str(TRACE), "--workload-out", str(tmp_path / "traced.yaml"), "--like", WORKLOAD)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "traced.yaml").read_text() == written
