"""`pddplan optimize` and `gate`: the best plan per architecture, and the cost gate over the shipped scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import (
    ArchitectureOption,
    JsonFlag,
    ReportOption,
    _check_report,
    _write_report,
)

if TYPE_CHECKING:
    pass


# -- optimization -------------------------------------------------------------------------------
OptimizeWorkloadArg = Annotated[
    str | None,
    typer.Argument(
        help="Workload name (see `pddplan workloads list`) or YAML file; or none, and the flags --model, --gpu, "
        "--isl, --prefix, --osl, --rate and the SLA's describe one.",
        show_default=False,
    ),
]
RateOption = Annotated[
    float | None,
    typer.Option(
        "--rate",
        help="Cheapest plan serving exactly this req/s. Without a WORKLOAD: the built workload's arrival rate, "
        "which the plan serves whole.",
    ),
]
BudgetOption = Annotated[
    float | None, typer.Option("--budget", help="Most goodput for this $/hour (not capped at the workload's rate).")
]
SolverOption = Annotated[str, typer.Option("--solver", help="highs (default) or cbc.")]
TimeLimitOption = Annotated[float | None, typer.Option("--time-limit", help="Seconds per MILP solve.")]
MipGapOption = Annotated[float, typer.Option("--mip-gap", help="Relative MIP gap.")]
VerifyRequestsOption = Annotated[int, typer.Option("--requests", help="Requests simulated to verify each plan.")]
VerifySeedOption = Annotated[int, typer.Option("--seed", help="Seed of the verification simulation.")]
VerifyOption = Annotated[bool, typer.Option("--verify/--no-verify", help="Verify plans by simulation.")]
OptimizeJobsOption = Annotated[
    int | None, typer.Option("--jobs", "-j", help="Architectures optimized at once (default: one per CPU).")
]
EarlyStopOption = Annotated[
    bool,
    typer.Option(
        "--early-stop/--full-verification",
        help="Stop a verification after a quarter of --requests when its SLA intervals are conclusive.",
    ),
]
MinServedOption = Annotated[
    float, typer.Option("--min-served", help="BCR mode: serve at least this share of the offered rate.")
]
RelayOption = Annotated[
    str,
    typer.Option(
        "--relay",
        help="Where PDD's relay decodes: auto (whichever plan is better), dedicated (its own instances) "
        "or prefill (mixed into the prefill instances' steps).",
    ),
]
OutputPlanOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        help="Write the best plan here (YAML); with --robust the robust purchase, with --survive the N+1 plan.",
    ),
]
RobustnessOption = Annotated[
    bool,
    typer.Option(
        "--robustness",
        help="Then re-optimize up to 11 more times (rate x0.5 and x2, the price of the GPU only PDD decodes on "
        "-10% and +10%, instance widths two powers of two wider, the prefix caches in the other tiers, their "
        "retention halved and doubled, a decode batch cap) and show how the decision moves, and why.",
    ),
]
SurviveOption = Annotated[
    str | None,
    typer.Option(
        "--survive",
        help="Also grow each architecture's plan until it meets the SLA after losing any one instance, line, "
        "or both (instance,line): N+1, with its price.",
    ),
]
# -- a plan from flags (no WORKLOAD): the workload they describe, written to a file -------------
ModelFlag = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Without a WORKLOAD: catalog model, the Hugging Face id of one (Qwen/Qwen3-32B), or a local "
        "config.json; never downloaded.",
    ),
]
GpuOffersFlag = Annotated[
    list[str] | None,
    typer.Option(
        "--gpu",
        metavar="TYPE:COUNT[@DC]",
        help="Without a WORKLOAD: up to COUNT GPUs of hardware profile TYPE (h200:32), in datacenter dc-a unless "
        "@DC follows (repeatable).",
    ),
]
IslFlag = Annotated[int | None, typer.Option("--isl", help="Without a WORKLOAD: prompt tokens of every request.")]
PrefixFlag = Annotated[
    int | None,
    typer.Option("--prefix", help="Without a WORKLOAD: of those, tokens of cached prefix (hit rate prefix / isl)."),
]
OslFlag = Annotated[int | None, typer.Option("--osl", help="Without a WORKLOAD: output tokens of every request.")]


def _sla_flag(metric: str, quantile: str) -> Any:
    required = " (required)" if metric == "ttft" and quantile in ("p90", "p99") else ""
    return typer.Option(
        f"--{metric}-{quantile}",
        metavar="SECONDS",
        help=f"Without a WORKLOAD: {metric.upper()} {quantile.upper()} target{required}, seconds (2) or "
        "with a unit (2s, 50ms).",
    )


TtftP50Flag = Annotated[str | None, _sla_flag("ttft", "p50")]
TtftP90Flag = Annotated[str | None, _sla_flag("ttft", "p90")]
TtftP99Flag = Annotated[str | None, _sla_flag("ttft", "p99")]
TpotP50Flag = Annotated[str | None, _sla_flag("tpot", "p50")]
TpotP90Flag = Annotated[str | None, _sla_flag("tpot", "p90")]
TpotP99Flag = Annotated[str | None, _sla_flag("tpot", "p99")]
PriceInputFlag = Annotated[
    float | None,
    typer.Option(
        "--price-input", help="Without a WORKLOAD: USD per million input tokens (none: revenue unknown, read as 0)."
    ),
]
PriceCachedFlag = Annotated[
    float | None,
    typer.Option("--price-cached-input", help="Without a WORKLOAD: USD per million cached tokens (default: input's)."),
]
PriceOutputFlag = Annotated[
    float | None, typer.Option("--price-output", help="Without a WORKLOAD: USD per million output tokens.")
]
WriteWorkloadFlag = Annotated[
    Path | None,
    typer.Option(
        "--write-workload",
        help="Without a WORKLOAD: write the built workload here (default: ./NAME.yaml), to edit and re-run.",
    ),
]
ForceFlag = Annotated[
    bool, typer.Option("--force", help="Without a WORKLOAD: replace a workload file that holds another workload.")
]
TopOption = Annotated[
    int | None,
    typer.Option(
        "--top",
        help="Also list the N best plans (1 to 20) per architecture and their cost frontier against TTFT P99 "
        "and TPOT P90: the plans the search evaluated in closed form and a few more solves; only the first, "
        "the chosen plan, is verified by simulation.",
    ),
]
RobustDayOption = Annotated[
    bool,
    typer.Option(
        "--robust",
        help="Also find, per architecture, the cheapest purchase that meets the SLA in every required scenario "
        "of the workload's `scenarios:` (peak, off-peak, a degraded line, hit drift), with its figures in each.",
    ),
]


@app.command("optimize")
def optimize(
    workload: OptimizeWorkloadArg = None,
    rate: RateOption = None,
    budget: BudgetOption = None,
    architecture: ArchitectureOption = None,
    solver: SolverOption = "highs",
    time_limit: TimeLimitOption = None,
    mip_gap: MipGapOption = 1e-6,
    requests: VerifyRequestsOption = 10_000,
    seed: VerifySeedOption = 0,
    verify: VerifyOption = True,
    jobs: OptimizeJobsOption = None,
    early_stop: EarlyStopOption = True,
    min_served: MinServedOption = 1.0,
    relay: RelayOption = "auto",
    output_plan: OutputPlanOption = None,
    report_path: ReportOption = None,
    robust: RobustnessOption = False,
    survive_kinds: SurviveOption = None,
    robust_day: RobustDayOption = False,
    json_out: JsonFlag = False,
    model: ModelFlag = None,
    gpu: GpuOffersFlag = None,
    isl: IslFlag = None,
    prefix: PrefixFlag = None,
    osl: OslFlag = None,
    ttft_p50: TtftP50Flag = None,
    ttft_p90: TtftP90Flag = None,
    ttft_p99: TtftP99Flag = None,
    tpot_p50: TpotP50Flag = None,
    tpot_p90: TpotP90Flag = None,
    tpot_p99: TpotP99Flag = None,
    price_input: PriceInputFlag = None,
    price_cached_input: PriceCachedFlag = None,
    price_output: PriceOutputFlag = None,
    write_workload: WriteWorkloadFlag = None,
    force: ForceFlag = False,
    top: TopOption = None,
) -> None:
    """Best deployment (GPU counts per role and datacenter, WAN lines) for BCR under the SLA, beside
    the baselines; exit 3 with the binding constraint when nothing is feasible.

    Without a WORKLOAD, the flags from --model on describe one (fixed lengths, one hit rate, the GPU
    offers in one datacenter); it is written to a file (--write-workload) and planned."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.inputs.workload_flags import WorkloadFlags, workload_for_optimize
    from pddplan.optimize.command import OptimizeFlags, run_request
    from pddplan.report import optimize_report, output

    described = {name: given.pop(name) for name in ONE_LINE_FLAGS}
    # every other option refused before a workload built from the flags is written (there --rate
    # is the workload's arrival rate, not the rate mode's)
    OptimizeFlags(**(given | {"workload": "", "rate": None} if given["workload"] is None else given)).options()
    _check_report(report_path)
    gpus, path, force_write = tuple(described.pop("gpu") or ()), described.pop("write_workload"), described.pop("force")
    flags = WorkloadFlags(gpus=gpus, rate=rate, **described)
    workload, notes = workload_for_optimize(workload, flags, path, force_write)
    for note in notes:
        output.diagnostics().print(note, markup=False, highlight=False)
    if given["workload"] is None:  # built from the flags: --rate was its arrival rate
        given |= {"workload": workload, "rate": None}
    request = OptimizeFlags(**given).request()
    with output.status("optimizing...") as status:
        outcome = run_request(request, progress=status.update)
    written = outcome.write_plan(output_plan, request.spec.name)
    optimize_report.show(outcome, json_out, written)
    if written is not None:
        output.diagnostics().print(f"wrote {written} to {output_plan}", markup=False, highlight=False)
    _optimize_report(report_path, workload, outcome.report, seed)
    outcome.raise_if_infeasible()


#: `optimize`'s parameters that describe a workload instead of naming one (`WorkloadFlags`)
ONE_LINE_FLAGS = (
    "model",
    "gpu",
    "isl",
    "prefix",
    "osl",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "tpot_p50",
    "tpot_p90",
    "tpot_p99",
    "price_input",
    "price_cached_input",
    "price_output",
    "write_workload",
    "force",
)


def _optimize_report(path: Path | None, workload: str, report: Any, seed: int) -> None:
    """The HTML report of optimize's best plan, the architectures beside it (no path or no plan:
    nothing written)."""
    from pddplan.report import output
    from pddplan.report.plan_report import comparison_of

    best = report.best
    if path is None or best is None or best.scenario is None or best.evaluation is None:
        return
    with output.status("writing the report..."):
        _write_report(
            path,
            workload,
            scenario=best.scenario,
            figures=best.evaluation.to_output(),
            figures_source="closed form; the plan was verified by simulation",
            comparison=comparison_of(report),
            seed=seed,
        )


# -- CI gate -------------------------------------------------------------------------------------
BaselineArg = Annotated[Path, typer.Argument(help="Baseline JSON with scenarios and committed results.")]
UpdateOption = Annotated[
    bool, typer.Option("--update", help="Rewrite the baseline with the new results (regressions need --accept).")
]
InitOption = Annotated[
    list[str] | None, typer.Option("--init", help="Create BASELINE from these workloads (repeatable).")
]
RtolOption = Annotated[float | None, typer.Option("--rtol", help="Relative tolerance for every metric.")]
TolOption = Annotated[
    list[str] | None, typer.Option("--tol", help="Per-metric tolerance, e.g. cost_usd_per_hour=0.02 (repeatable).")
]
GateMarkdownOption = Annotated[Path | None, typer.Option("--markdown", help="Write a PR comment here.")]
AllowInfeasibleOption = Annotated[
    bool, typer.Option("--allow-infeasible", help="With --init/--update: record a scenario with no feasible plan.")
]
AcceptOption = Annotated[
    bool, typer.Option("--accept", help="With --update: record regressions and exit 0 (they are accepted).")
]


@app.command("gate")
def gate(
    baseline: BaselineArg,
    update: UpdateOption = False,
    init: InitOption = None,
    rtol: RtolOption = None,
    tol: TolOption = None,
    markdown_path: GateMarkdownOption = None,
    allow_infeasible: AllowInfeasibleOption = False,
    accept: AcceptOption = False,
    json_out: JsonFlag = False,
) -> None:
    """Fail (exit 1) when a change makes a scenario's best deployment cost more, lose BCR, or miss its SLA.

    Exit 0 only when every scenario re-ran, feasible (or recorded infeasible) and no worse; 2 when one cannot run."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses import gate as gating
    from pddplan.errors import GateFailed
    from pddplan.report import gate_report, output
    from pddplan.support.loading import write_atomic

    flags = gating.GateFlags(**given)
    tolerances = flags.tolerances()
    flags.check_init()
    if init:
        with output.status("creating the baseline...") as status:
            output.diagnostics().print(gating.create_baseline(flags, status.update))
        return
    with output.status("gating...") as status:
        spec, checks = gating.gate(baseline, progress=status.update, tolerances=tolerances or None, rtol=rtol)
    if markdown_path is not None:
        write_atomic(markdown_path, gate_report.markdown(checks))
        output.wrote(markdown_path)
    if json_out:
        output.emit_json(gating.outcome(checks))
    else:
        gate_report.print_checks(output.results(), checks)
    notices, failure = gating.conclude(flags, spec, checks)
    for notice in notices:
        output.diagnostics().print(notice)
    if failure is not None:
        raise GateFailed(failure)
