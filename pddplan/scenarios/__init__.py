"""A plan resolved against its workload (`build_scenario`), and the workload's variants.

Its verbs, imported on first use (`pddplan.support.lazy`):
    build_scenario      pddplan.scenarios.scenario
    plan_scenario       pddplan.scenarios.files
    scenario_workloads  pddplan.scenarios.variants
    with_hit            pddplan.scenarios.variants
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "build_scenario": "pddplan.scenarios.scenario",
        "plan_scenario": "pddplan.scenarios.files",
        "scenario_workloads": "pddplan.scenarios.variants",
        "with_hit": "pddplan.scenarios.variants",
    },
)
