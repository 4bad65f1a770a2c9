"""The architecture registry: every architecture is one module, nothing outside the package compares
architecture names, the import graph has no cycle, and pd-hetero behaves as specified."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from pddplan import architectures
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import optimize_architecture
from pddplan.optimize.options import OptimizeOptions
from pddplan.specs.plan import Plan

PACKAGE = Path(__file__).resolve().parent.parent / "pddplan"


def test_registry_finds_one_architecture_per_module_in_table_order() -> None:
    modules = sorted(p.stem for p in (PACKAGE / "architectures").glob("*.py") if p.stem not in ("__init__", "base"))
    assert len(architectures.names()) == len(modules) == 5
    assert architectures.names() == ("agg", "pd-intra", "pd-hetero", "pd-cross", "pdd")
    assert architectures.subject().name == "pdd"
    assert [a.name for a in architectures.baselines()] == ["agg", "pd-intra", "pd-hetero", "pd-cross"]
    with pytest.raises(KeyError, match="expected one of agg, pd-intra"):
        architectures.get("pd-nowhere")


NAME_COMPARISON = re.compile(r"""(==|!=|\bin|\bnot in)\s*[\(\[{]?\s*["'](agg|pd-intra|pd-hetero|pd-cross|pdd)["']""")
NAME_COMPARED = re.compile(r"""["'](agg|pd-intra|pd-hetero|pd-cross|pdd)["']\s*(==|!=|\bin\b)""")


def test_no_architecture_name_comparison_outside_the_registry() -> None:
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "architectures" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if NAME_COMPARISON.search(line) or NAME_COMPARED.search(line):
                found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_name_check_finds_a_comparison() -> None:
    """The pattern the previous test relies on matches the forms it must catch."""
    for line in ('if arch == "pdd":', 'x if plan.architecture != "pd-intra" else y', 'if name in ("pd-cross", "pdd")'):
        assert NAME_COMPARISON.search(line) or NAME_COMPARED.search(line), line


def _imports(path: Path) -> set[str]:
    """Modules of pddplan a file imports, at any depth, except under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pddplan"):
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.startswith("pddplan"))
    return out


def test_no_import_cycle() -> None:
    """Edges: every pddplan import, including those inside functions (a late import hides a cycle,
    it does not remove it); a package's __init__ is not an edge from its submodules."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph = {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*trail[trail.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def _plan(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "architecture": "pd-hetero",
        "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 8, "count": 1},
        "decode": {"datacenter": "dc-a", "gpu": "gpu-b", "tp": 8, "count": 1},
    }
    base.update(changes)
    return base


def test_pd_hetero_plans_decode_on_another_gpu_type_in_the_same_datacenter() -> None:
    Plan.model_validate(_plan())
    with pytest.raises(ValidationError, match="another GPU type than prefill"):
        Plan.model_validate(_plan(decode={"datacenter": "dc-a", "gpu": "gpu-a", "tp": 8, "count": 1}))
    with pytest.raises(ValidationError, match="keeps prefill and decode in one datacenter"):
        Plan.model_validate(_plan(decode={"datacenter": "dc-b", "gpu": "gpu-b", "tp": 8, "count": 1}))
    with pytest.raises(ValidationError, match="has no relay"):
        Plan.model_validate(_plan(relay={"datacenter": "dc-a", "gpu": "gpu-a", "tp": 8, "count": 1}))
    with pytest.raises(ValidationError, match="the same GPU type as prefill"):
        Plan.model_validate(_plan(architecture="pd-intra"))
    with pytest.raises(ValidationError, match="unknown architecture 'pd-x'"):
        Plan.model_validate(_plan(architecture="pd-x"))


def test_first_token_paths() -> None:
    """RDMA + tau_D over RDMA, WAN + tau_D over the WAN, and per request for pdd (hand values)."""
    rdma = np.array([[0.1], [0.2]])
    wan = np.array([[2.0, 3.0], [4.0, 5.0]])
    relayed = np.array([[True], [False]])
    hetero = architectures.get("pd-hetero").first_token_delay(rdma, wan, 0.05, 0.02, relayed)
    assert np.allclose(hetero, [[0.15, 0.15], [0.25, 0.25]], rtol=1e-12)
    cross = architectures.get("pd-cross").first_token_delay(rdma, wan, 0.05, 0.02, relayed)
    assert np.allclose(cross, [[2.05, 3.05], [4.05, 5.05]], rtol=1e-12)
    pdd = architectures.get("pdd").first_token_delay(rdma, wan, 0.05, 0.02, relayed)
    assert np.allclose(pdd, [[0.12, 0.12], [4.05, 5.05]], rtol=1e-12)


def test_pd_hetero_is_unavailable_where_one_datacenter_offers_one_gpu_type() -> None:
    workload = load_workload("pdd-agent-64k")
    result = optimize_architecture(
        load_input_set(workload, workload_dir("pdd-agent-64k")), "pd-hetero", OptimizeOptions(verify=False)
    )
    assert not result.feasible
    assert "offers one GPU type (gpu-a)" in result.infeasibility[0]["message"]


def test_pd_hetero_optimizes_on_the_two_type_variant() -> None:
    """On pdd-agent-64k-hetero the plan prefills on one type and decodes on the other, in the home
    datacenter, leases no line and meets the SLA."""
    name = "pdd-agent-64k-hetero"
    workload = load_workload(name)
    result = optimize_architecture(
        load_input_set(workload, workload_dir(name)), "pd-hetero", OptimizeOptions(verify_requests=2000)
    )
    assert result.feasible and result.plan is not None and result.evaluation is not None
    plan = result.plan
    assert plan.prefill.gpu != plan.decode.gpu
    assert plan.prefill.datacenter == plan.decode.datacenter == workload.deployment.home
    assert plan.wan == [] and plan.relay is None
    assert result.evaluation.sla_met and result.evaluation.wan_gbps_offered == 0.0


def test_architectures_command_lists_the_registry() -> None:
    from typer.testing import CliRunner

    from pddplan.cli import app

    result = CliRunner().invoke(app, ["architectures", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == list(architectures.names())
    agg, hetero = rows[0], rows[2]
    assert (agg["kv_path"], agg["decode_gpu"], agg["relay"]) == ("none", "same", False)
    assert (hetero["kv_path"], hetero["decode_gpu"], hetero["relay"], hetero["decode_datacenter"]) == (
        "rdma",
        "other",
        False,
        "same",
    )
