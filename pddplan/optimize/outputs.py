"""What `optimize --json` and `survive --json` print."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pddplan.evaluate.outputs import Evaluation
from pddplan.simulate.outputs import Simulation
from pddplan.support.outputs import Output, Seconds


class Role(Output):
    datacenter: str
    gpu: str
    tp: int
    expert_parallel: bool | None
    count: int
    tp_attention: bool | None = Field(default=None, description="present (true) when EP runs tensor-parallel attention")
    pp: int | None = Field(default=None, description="pipeline stages of tp GPUs each (present when more than one)")
    relay_on_prefill: bool | None = None
    share: float | None = Field(
        default=None, description="a split agg plan's second pool (role `split`): the share of the requests it serves"
    )


class WanLease(Output):
    option: str
    count: int


class PlanChoice(Output):
    """One plan `optimize --top N` lists, with its figures in closed form: rank 1 is the plan the
    optimizer chose (the one the simulation verified), the others are ranked by the mode's score."""

    rank: int
    checked: Literal["verified", "closed form"] = Field(
        description="verified: the simulation met the SLA too (only rank 1 is simulated); closed form: not simulated"
    )
    found_by: str = Field(
        description="program (a solution at a relay placement and handoff mode), trimmed, re-solved (the program "
        "without the prefill kinds before it) or '+1 ROLE' (one more instance)"
    )
    cost_usd_per_hour: float
    goodput_rps: float
    bcr: float
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p90_s: Seconds
    tpot_p99_s: Seconds
    gpus: dict[str, int]
    roles: dict[str, Role]
    wan_lines: list[WanLease]
    routing_rule: str | None
    handoff_mode: str | None
    plan: dict[str, Any] = Field(description="the plan file (schemas/plan.schema.json)")


class FrontierPlan(PlanChoice):
    """A plan on the cost-latency frontier: no plan compared is as cheap and as fast with one better."""

    on: list[Literal["ttft_p99_s", "tpot_p90_s"]] = Field(description="the latencies it is on the frontier of")


class ArchitectureResult(Output):
    name: str
    feasible: bool
    gpus: dict[str, int]
    roles: dict[str, Role]
    wan_lines: list[WanLease]
    wan_gbps: float
    cost_usd_per_hour: float | None
    goodput_rps: float
    bcr: float | None
    ttft_p50_s: Seconds
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p50_s: Seconds = None
    tpot_p90_s: Seconds = None
    tpot_p99_s: Seconds = None
    rld_token_share: float | None = None
    link_utilization: float | None = None
    routing_threshold: float | None = None
    routing_rule: str | None = None
    handoff_mode: str | None = None
    verified: bool = False
    verification_rounds: int = 0
    solves: int = 0
    evaluated: Evaluation | None = None
    simulated: Simulation | None = None
    infeasibility: list[dict[str, Any]]
    plan: dict[str, Any] | None = Field(default=None, description="the plan file (schemas/plan.schema.json)")
    plans_compared: int | None = Field(
        default=None, description="with --top: the deployments meeting the SLA in closed form that were ranked"
    )
    top: list[PlanChoice] | None = Field(default=None, description="with --top N: the N best plans, best first")
    frontier: list[FrontierPlan] | None = Field(
        default=None, description="with --top: the plans on the frontier of cost against TTFT P99 or TPOT P90"
    )


class Gain(Output):
    cost_change: float | None
    bcr_change: float | None
    ttft_p90_change: float | None
    ttft_p99_change: float | None
    baseline_feasible: bool


class InstanceWidths(Output):
    by_gpu: dict[str, list[int]]
    narrowed_by_workload: bool


class RobustScenario(Output):
    name: str
    hours_per_day: float
    required: bool
    rate_rps: float
    sla_met: bool
    goodput_rps: float
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    bcr: float | None
    routing_rule: str | None = Field(description="this scenario's routing rule for PDD's relay (null: no relay)")
    handoff_mode: str | None = Field(description="this scenario's handoff mode for PDD's relay (null: no relay)")
    served_rps: float = Field(
        description="the rate served: the offered one, or the most within the SLA (the rest shed)"
    )
    active_gpus: int | None = Field(description="GPUs of the purchase this scenario keeps busy (null: SLA not met)")
    active_cost_usd_per_hour: float | None = Field(description="what those GPUs cost per hour")


class RobustArchitecture(Output):
    architecture: str
    feasible: bool
    cost_usd_per_hour: float | None
    lower_bound_usd_per_hour: float | None = Field(
        description="the costliest required scenario's own optimum: no plan meeting them all costs less"
    )
    at_lower_bound: bool
    steady_cost_usd_per_hour: float | None
    price_of_robustness: float | None = Field(description="cost over the steady plan's, as a share of it")
    time_weighted_bcr: float | None
    elastic_cost_usd_per_hour: float | None = Field(
        description="the day's mean cost per hour when the instances a scenario leaves idle cost nothing"
    )
    scenarios: list[RobustScenario]
    plan: dict[str, Any] | None
    note: str


class Disaggregation(Output):
    """Whether to disaggregate: the best disaggregated plan's cost and BCR change over the best
    co-located one's (negative cost change: disaggregating is cheaper)."""

    colocated: str
    disaggregated: str
    winner: str
    cost_change: float
    bcr_change: float


class ArchitectureSurvival(Output):
    """`optimize --survive`: one architecture's plan grown to N+1 (the keys of `survive --json`),
    or the reason it cannot be (then only architecture, feasible and reason)."""

    architecture: str
    feasible: bool
    reason: str | None
    original_cost_usd_per_hour: float | None = None
    cost_usd_per_hour: float | None = None
    price_of_survival: float | None = None
    degraded_sla: float | None = None
    added: list[str] | None = None
    failures: list[FailureMode] | None = None
    plan: dict[str, Any] | None = None


class Optimize(Output):
    """`optimize --json`."""

    workload: str
    mode: str
    rate_rps: float | None
    budget_usd_per_hour: float | None
    best: str | None
    architectures: list[ArchitectureResult]
    gains: dict[str, Gain]
    disaggregation: Disaggregation | None = Field(
        description="the best co-located plan against the best disaggregated one (null unless both exist)"
    )
    instance_widths: InstanceWidths
    robustness: Robustness | None = None
    robust: list[RobustArchitecture] | None = Field(
        default=None, description="with --robust: per architecture, one purchase for every required scenario"
    )
    survive: list[ArchitectureSurvival] | None = Field(
        default=None, description="with --survive: per architecture, its plan grown to N+1 (as `survive --json`)"
    )
    output_plan: str | None = Field(
        default=None, description="with --output: which plan it wrote (the best, the robust purchase, the N+1 plan)"
    )


class FailureMode(Output):
    failure: str = Field(description="instance:ROLE or line:OPTION")
    mode: str = Field(description="how the grown plan runs after it")


class Survive(Output):
    """`survive --json`."""

    original_cost_usd_per_hour: float
    cost_usd_per_hour: float
    price_of_survival: float = Field(description="extra cost over the original plan, as a share of it")
    degraded_sla: float = Field(description="the SLA's targets after a failure, as a multiple of the full SLA's")
    added: list[str]
    failures: list[FailureMode]
    plan: dict[str, Any] = Field(description="the grown plan, as a plan file holds it")


class RobustnessRow(Output):
    """The decision under one variation. Costs are $/h; `cost_change_vs_best_baseline` is PDD's cost over the best
    baseline's minus one (negative: PDD is cheaper); None where either has no feasible plan."""

    variation: str
    kind: str = "nominal"
    best: str | None = None
    subject: str = "pdd"
    subject_feasible: bool = False
    subject_cost_usd_per_hour: float | None = None
    subject_bcr: float | None = None
    best_baseline: str | None = None
    best_baseline_cost_usd_per_hour: float | None = None
    cost_change_vs_best_baseline: float | None = None
    vs_baselines: dict[str, dict[str, Any]] = Field(default_factory=dict)
    change: dict[str, Any] = Field(default_factory=dict)
    # per feasible architecture and role: the instances ('2 x gpu-b TP16') and the term that sets
    # the role's capacity (`CapacityView.limits`), to say why a decision moved
    plans: dict[str, dict[str, str]] = Field(default_factory=dict)
    limits: dict[str, dict[str, str]] = Field(default_factory=dict)


class Robustness(Output):
    """`optimize --robustness`: one row per variation (nominal first), the verdict and its reasons."""

    rows: list[RobustnessRow]
    verdict: str
    reasons: list[str]
    notes: list[str]
