"""Evaluation and simulation: `pddplan simulate` handles 100,000 requests of pdd-agent-64k in
<= 2 s (issue 38; it was 10 s), and `evaluate` answers in <= 50 ms.

    python benchmarks/bench_simulate.py
"""

from __future__ import annotations

import copy

from _timing import ROOT, repeat, report

from pddplan.evaluate.analytic import evaluate
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.run import optimize
from pddplan.optimize.search import OptimizeOptions
from pddplan.scenarios.scenario import build_scenario
from pddplan.simulate.engine import simulate_requests


def main() -> None:
    workload = load_workload("pdd-agent-64k")
    base = workload_dir("pdd-agent-64k")
    report_ = optimize(workload, base, OptimizeOptions(verify=False), ("pdd",))
    plan = report_.results[0].plan
    assert plan is not None
    scenario = build_scenario(plan, load_input_set(workload, base))
    evaluate(scenario)  # warm imports
    # a copy each time: evaluate keeps its last results by the scenario's identity
    ok = report("evaluate (closed form), optimized pdd plan", repeat(lambda: evaluate(copy.copy(scenario)), 20), 0.05)
    ok &= report(
        "simulate 100,000 requests of pdd-agent-64k", repeat(lambda: simulate_requests(scenario, 100_000, 0), 3), 2.0
    )
    hand = build_scenario(
        load_plan(str(ROOT / "examples/plans/pdd-agent-64k-pdd.yaml")), load_input_set(workload, base)
    )
    ok &= report("evaluate (closed form), hand-written pdd plan", repeat(lambda: evaluate(copy.copy(hand)), 20), 0.05)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
