"""Gate baseline files: named scenarios (a workload plus optimize options) with committed results."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pddplan.specs.common import NonNegativeFloat, PositiveFloat, StrictModel
from pddplan.specs.plan import ArchitectureName, architecture_rules

Metric = Literal["cost_usd_per_hour", "bcr", "goodput_rps"]
# names baseline files written before money keys carried `_usd` still use (read, never written)
OLD_NAMES = {"cost_per_hour": "cost_usd_per_hour", "budget_per_hour": "budget_usd_per_hour"}


def _renamed(data: Any) -> Any:
    """A mapping with its OLD_NAMES keys under their current names."""
    if not isinstance(data, dict):
        return data
    return {OLD_NAMES.get(key, key): value for key, value in data.items()}


class ScenarioOptions(StrictModel):
    """How `pddplan gate` re-optimizes a scenario (the `optimize` options that matter)."""

    mode: Literal["bcr", "rate", "budget"] = "bcr"
    rate_rps: PositiveFloat | None = None
    budget_usd_per_hour: PositiveFloat | None = None
    min_served_fraction: float = Field(default=1.0, ge=0, le=1)
    architectures: list[ArchitectureName] | None = Field(
        default=None, min_length=1, description="default: every architecture pddplan knows"
    )
    requests: int = Field(default=5000, ge=100, description="requests simulated to verify")
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return _renamed(data)

    @field_validator("architectures")
    @classmethod
    def _known(cls, names: list[str] | None) -> list[str] | None:
        known = architecture_rules().names()
        for name in names or []:
            if name not in known:
                raise ValueError(f"unknown architecture {name!r}: expected one of {', '.join(known)}")
        return names

    @model_validator(mode="after")
    def _mode_inputs(self) -> ScenarioOptions:
        if self.mode == "rate" and self.rate_rps is None:
            raise ValueError("mode rate needs rate_rps")
        if self.mode == "budget" and self.budget_usd_per_hour is None:
            raise ValueError("mode budget needs budget_usd_per_hour")
        return self


class ScenarioResult(StrictModel):
    """The committed outcome of a scenario: objective values, not the exact configuration."""

    best: str | None
    feasible: bool
    cost_usd_per_hour: NonNegativeFloat | None = None
    bcr: NonNegativeFloat | None = None
    goodput_rps: NonNegativeFloat | None = None
    gpus: dict[str, int] = Field(default_factory=dict)
    wan_gbps: NonNegativeFloat = 0.0
    ttft_p90_s: NonNegativeFloat | None = None
    ttft_p99_s: NonNegativeFloat | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return _renamed(data)


class GateScenario(StrictModel):
    """One scenario to gate: a feasible result with its objective values, or an infeasible one
    recorded on purpose (`allow_infeasible`, set by `gate --allow-infeasible`)."""

    name: str = Field(min_length=1)
    workload: str = Field(min_length=1, description="workload name or path (relative to the baseline file)")
    options: ScenarioOptions = ScenarioOptions()
    allow_infeasible: bool = Field(
        default=False, description="an infeasible result was recorded on purpose (`gate --allow-infeasible`)"
    )
    result: ScenarioResult

    @model_validator(mode="after")
    def _a_result_that_can_gate(self) -> GateScenario:
        result = self.result
        if result.feasible:
            missing = [m for m in ("cost_usd_per_hour", "bcr", "goodput_rps") if getattr(result, m) is None]
            if missing or result.best is None:
                raise ValueError(
                    f"scenario {self.name!r}: a feasible result needs best, cost_usd_per_hour, bcr and goodput_rps"
                    f" (missing: {', '.join(missing or ['best'])})"
                )
            if not result.cost_usd_per_hour:
                raise ValueError(f"scenario {self.name!r}: a feasible result costs more than $0/h")
        elif not self.allow_infeasible:
            raise ValueError(
                f"scenario {self.name!r} is recorded infeasible: nothing to gate against; fix the workload, or "
                "record it on purpose with `pddplan gate BASELINE --update --allow-infeasible`"
            )
        return self


#: the largest relative tolerance: a change of 1,000% (a gate that lets more through checks nothing)
MAX_TOLERANCE = 10.0
Tolerance = Annotated[float, Field(ge=0, le=MAX_TOLERANCE)]


class Tolerances(StrictModel):
    """Relative tolerances before a change counts (default `rtol`, per-metric overrides)."""

    rtol: Tolerance = 0.01
    per_metric: dict[Metric, Tolerance] = Field(default_factory=dict)

    @field_validator("per_metric", mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return _renamed(data)

    def of(self, metric: Metric) -> float:
        return self.per_metric.get(metric, self.rtol)


class Baseline(StrictModel):
    """A gate baseline file."""

    version: Literal[1] = 1
    tolerances: Tolerances = Tolerances()
    scenarios: list[GateScenario] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Baseline:
        names = [s.name for s in self.scenarios]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario names repeat: {names}")
        return self
