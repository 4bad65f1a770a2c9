"""A resolved plan as plain data: its roles and its line, as drawings and `--json` show them."""

from __future__ import annotations

from typing import Any

from pddplan.scenarios.scenario import Scenario


def layout_label(tp: int, expert_parallel: bool | None, tp_attention: bool = False, pp: int = 1) -> str:
    """TP8; TP8 EP when the instance runs expert parallelism with data-parallel attention; TP8 EP-TPA
    with tensor-parallel attention; TP8 PP2 with two pipeline stages of TP8."""
    stages = f" PP{pp}" if pp > 1 else ""
    if not expert_parallel:
        return f"TP{tp}{stages}"
    return f"TP{tp}{stages} EP" + ("-TPA" if tp_attention else "")


def scenario_roles(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """Roles of a scenario as plain dicts (for drawings and JSON)."""
    return {
        name: {
            "datacenter": role.spec.datacenter,
            "gpu": role.spec.gpu,
            "tp": role.spec.tp,
            "expert_parallel": role.instance.uses_ep if scenario.model.moe is not None else None,
            "count": role.count,
        }
        | ({"tp_attention": True} if role.instance.tp_attention else {})
        | ({"pp": role.spec.pp} if role.spec.pp > 1 else {})
        | ({"relay_on_prefill": True} if name == "prefill" and scenario.relay_colocated else {})
        | ({"share": scenario.plan.split.share} if name == "split" and scenario.plan.split is not None else {})
        for name, role in scenario.roles.items()
    }


def scenario_wan(scenario: Scenario) -> dict[str, Any] | None:
    """The pooled WAN link of a scenario as a plain dict."""
    if scenario.link is None:
        return None
    return {
        "gbps": scenario.link.gbps,
        "lines": sum(count for _, count in scenario.link.leases),
        "rtt_ms": scenario.link.rtt_s * 1e3,
    }
