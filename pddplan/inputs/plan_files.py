"""Plan files as YAML, the format `evaluate` and `simulate` read."""

from __future__ import annotations

import yaml

from pddplan.specs.plan import Plan


def plan_yaml(plan: Plan, workload_name: str) -> str:
    """A plan as commented YAML (defaults included, so the file says everything it means)."""
    header = (
        f"# Plan written by `pddplan optimize` for workload {workload_name}.\n"
        f"# Check it with: pddplan evaluate PLAN {workload_name}  /  pddplan simulate PLAN {workload_name}\n"
    )
    body = yaml.safe_dump(plan.model_dump(mode="json"), sort_keys=False, default_flow_style=False)
    return header + body
