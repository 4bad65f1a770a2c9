"""A plan file and a workload (a YAML file or a shipped name) read into what the analyses take: the
workload's input set, and the plan resolved against it."""

from __future__ import annotations

from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.scenarios.scenario import Scenario, build_scenario


def workload_inputs(workload: str) -> InputSet:
    """The input set of `workload`, its relative paths (model file, GPU profiles) read from the
    workload's own folder."""
    return load_input_set(load_workload(workload), workload_dir(workload))


def plan_scenario(plan: str, workload: str) -> Scenario:
    """The plan file `plan` resolved against `workload` (the workload read first, then the plan);
    InputError naming the plan when they disagree."""
    inputs = workload_inputs(workload)
    return build_scenario(load_plan(plan), inputs, source=plan)
