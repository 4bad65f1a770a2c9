"""`pddplan agreement` on the workloads named: their rows only, each architecture's figures once,
in the published schema. (Every shipped workload takes twenty seconds and more; one shows the same.)"""

from __future__ import annotations

import collections
from typing import Any

from cli_results import json_of

from pddplan.analyses.agreement import FIGURES
from pddplan.report.schemas import validate_output


def test_agreement_on_the_workloads_named_matches_its_schema(cli: Any) -> None:
    # named twice: compared once
    data = json_of(
        cli("agreement", "-w", "chat-short-lowhit", "--workload", "chat-short-lowhit", "--requests", "500", "--json")
    )
    validate_output("agreement", data)
    rows = data
    assert {row["workload"] for row in rows} == {"chat-short-lowhit"}
    per_architecture = collections.Counter(row["architecture"] for row in rows)
    assert per_architecture and set(per_architecture.values()) == {len(FIGURES)}


def test_an_unknown_workload_is_one_error_line(cli: Any) -> None:
    result = cli("agreement", "-w", "no-such-workload")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: unknown workload 'no-such-workload'") and result.stderr.count("\n") == 1
