"""How a fixed plan's BCR moves when one input moves by up to +-20%: each GPU type's price, the line
price, the prefix hit rate and the request rate (the deployment stays; only the input changes).

  price of GPU type g x f   the offers of g in every datacenter priced at f x their price;
  line price x f            every WAN option's monthly price x f;
  prefix hit rate x f       the hit-rate distribution moved so its mean is f x the workload's
                            (`variants.hit_distribution`, mode shift), capped below 1;
  request rate x f          the plan evaluated at f x its rate.

Each point is the closed form's BCR (goodput per dollar: a plan that misses its SLA there earns
less); a point whose inputs the plan cannot take (a rate beyond what it serves at all) is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pddplan.errors import InputError
from pddplan.evaluate.analytic import evaluate
from pddplan.inputs.input_set import InputSet
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.scenarios.variants import scale_gpu_prices, with_hit
from pddplan.specs.workload import Workload

FACTORS = (0.8, 0.9, 1.0, 1.1, 1.2)
HIGHEST_MEAN_HIT = 0.995  # a shifted distribution whose mean reaches 1 has nothing left to prefill


@dataclass(frozen=True)
class Sensitivity:
    """BCR (requests per $) of one plan at each factor, per moved input."""

    factors: np.ndarray
    bcr: dict[str, np.ndarray]


def _line_prices(workload: Workload, factor: float) -> Workload:
    lines = [
        option.model_copy(update={"usd_per_month": option.usd_per_month * factor})
        for option in workload.deployment.wan_lines
    ]
    return workload.model_copy(update={"deployment": workload.deployment.model_copy(update={"wan_lines": lines})})


def _hit_scaled(workload: Workload, factor: float) -> Workload:
    mean = min(workload.hit_rate.mean() * factor, HIGHEST_MEAN_HIT)
    return workload.model_copy(update=with_hit(workload, mean, "shift"))


def _bcr_with(scenario: Scenario, inputs: InputSet, workload: Workload) -> float:
    try:
        return evaluate(build_scenario(scenario.plan, inputs.with_workload(workload), source="plan")).bcr
    except InputError:
        return float("nan")


def sensitivity(scenario: Scenario, inputs: InputSet, factors: tuple[float, ...] = FACTORS) -> Sensitivity:
    """BCR of `scenario`'s plan with each input of the module docstring moved by each factor."""
    workload = inputs.workload
    curves: dict[str, list[float]] = {}
    for gpu in sorted(scenario.gpus_by_type()):
        curves[f"{gpu} price"] = [
            _bcr_with(scenario, inputs, scale_gpu_prices(inputs, [gpu], factor)) for factor in factors
        ]
    if scenario.link is not None:
        curves["line price"] = [_bcr_with(scenario, inputs, _line_prices(workload, factor)) for factor in factors]
    curves["prefix hit rate"] = [_bcr_with(scenario, inputs, _hit_scaled(workload, factor)) for factor in factors]
    curves["request rate"] = [evaluate(scenario, scenario.rate_rps * factor).bcr for factor in factors]
    return Sensitivity(np.array(factors), {name: np.array(values) for name, values in curves.items()})
