"""`pddplan optimize` and `gate`: the best plan per architecture, and the cost gate over the shipped scenarios."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import (
    ArchitectureOption,
    JsonFlag,
    ReportOption,
    WorkloadArg,
    _architecture_names,
    _check_report,
    _relay_placement,
    _write_report,
)

if TYPE_CHECKING:
    pass


# -- optimization -------------------------------------------------------------------------------
@app.command("optimize")
def optimize(
    workload: WorkloadArg,
    rate: Annotated[float | None, typer.Option("--rate", help="Cheapest plan serving exactly this req/s.")] = None,
    budget: Annotated[
        float | None, typer.Option("--budget", help="Most goodput for this $/hour (not capped at the workload's rate).")
    ] = None,
    architecture: ArchitectureOption = None,
    solver: Annotated[str, typer.Option("--solver", help="highs (default) or cbc.")] = "highs",
    time_limit: Annotated[float | None, typer.Option("--time-limit", help="Seconds per MILP solve.")] = None,
    mip_gap: Annotated[float, typer.Option("--mip-gap", help="Relative MIP gap.")] = 1e-6,
    requests: Annotated[int, typer.Option("--requests", help="Requests simulated to verify each plan.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the verification simulation.")] = 0,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Verify plans by simulation.")] = True,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Architectures optimized at once (default: one per CPU)."),
    ] = None,
    early_stop: Annotated[
        bool,
        typer.Option(
            "--early-stop/--full-verification",
            help="Stop a verification after a quarter of --requests when its SLA intervals are conclusive.",
        ),
    ] = True,
    min_served: Annotated[
        float, typer.Option("--min-served", help="BCR mode: serve at least this share of the offered rate.")
    ] = 1.0,
    relay: Annotated[
        str,
        typer.Option(
            "--relay",
            help="Where PDD's relay decodes: auto (whichever plan is better), dedicated (its own instances) "
            "or prefill (mixed into the prefill instances' steps).",
        ),
    ] = "auto",
    output_plan: Annotated[Path | None, typer.Option("--output", help="Write the best plan here (YAML).")] = None,
    report_path: ReportOption = None,
    robust: Annotated[
        bool,
        typer.Option(
            "--robustness",
            help="Then re-optimize up to 5 more times (rate x0.5 and x2, the price of the GPU only PDD decodes on "
            "-10% and +10%, instance widths two powers of two wider) and show how the decision moves.",
        ),
    ] = False,
    survive_kinds: Annotated[
        str | None,
        typer.Option(
            "--survive",
            help="Also grow each architecture's plan until it meets the SLA after losing any one instance, line, "
            "or both (instance,line): N+1, with its price.",
        ),
    ] = None,
    robust_day: Annotated[
        bool,
        typer.Option(
            "--robust",
            help="Also find, per architecture, the cheapest purchase that meets the SLA in every required scenario "
            "of the workload's `scenarios:` (peak, off-peak, a degraded line, hit drift), with its figures in each.",
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Best deployment (GPU counts per role and datacenter, WAN lines) for BCR under the SLA, beside
    the baselines; exit 3 with the binding constraint when nothing is feasible."""
    from pddplan.errors import InfeasibleError, InputError
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.optimize.options import OptimizeOptions
    from pddplan.optimize.run import optimize as run
    from pddplan.optimize.solver import SolverOptions
    from pddplan.report import output
    from pddplan.support.limits import check_budget, check_rate, check_time_limit

    if rate is not None and budget is not None:
        raise InputError("give --rate or --budget, not both")
    if rate is not None:
        check_rate(rate)
    if budget is not None:
        check_budget(budget)
    if time_limit is not None:
        check_time_limit(time_limit)
    if not 0 <= mip_gap < 1:
        raise InputError(f"--mip-gap = {mip_gap}: must be in [0, 1)")
    if solver not in ("highs", "cbc"):
        raise InputError(f"--solver = {solver!r}: expected highs or cbc")
    names = _architecture_names(architecture)
    if not 0 <= min_served <= 1:
        raise InputError(f"--min-served = {min_served}: must be in [0, 1]")
    if requests < 100:
        raise InputError(f"--requests = {requests}: verify with at least 100 requests")
    options = OptimizeOptions(
        relay_placement=_relay_placement(relay),
        mode="rate" if rate else ("budget" if budget else "bcr"),
        rate=rate,
        budget_per_hour=budget,
        min_served_fraction=min_served,
        solver=SolverOptions(name=solver, time_limit_s=time_limit, mip_gap=mip_gap),  # type: ignore[arg-type]
        verify_requests=requests,
        seed=seed,
        verify=verify,
        early_stop=early_stop,
        jobs=jobs,
    )
    _check_report(report_path)
    spec = load_workload(workload)
    _check_further_analyses(spec, options, robust_day, survive_kinds)  # before the work, not after it
    with output.status("optimizing...") as status:
        report = run(spec, workload_dir(workload), options, names, progress=lambda text: status.update(text))
        robustness, day = _further_analyses(spec, workload, options, report, names, (robust, robust_day), status)
        survival = _survival(spec, workload, report, survive_kinds) if survive_kinds else None
    best = report.best
    chosen = chosen_plan(report, day, survival)
    if output_plan is not None and chosen is not None:
        from pddplan.report.plan_files import plan_yaml
        from pddplan.support.loading import write_atomic

        write_atomic(output_plan, plan_yaml(chosen[0], spec.name))
    written = chosen[1] if chosen is not None and output_plan is not None else None
    _show_optimize(json_out, report, robustness, day, survival, written)
    if output_plan is not None and chosen is not None:
        output.diagnostics().print(f"wrote {chosen[1]} to {output_plan}", markup=False, highlight=False)
    _optimize_report(report_path, workload, report, seed)
    if best is None:
        raise InfeasibleError(f"no architecture meets the constraints. {_reasons(report.results)}")


def _further_analyses(
    spec: Any, workload: str, options: Any, report: Any, names: Any, wanted: tuple[bool, bool], status: Any
) -> tuple[Any, Any]:
    """`--robustness` (how the decision moves) and `--robust` (one purchase for the day), as asked."""
    from pddplan.inputs import workload_dir

    robustness = day = None
    if wanted[0]:
        from pddplan.optimize.robustness import robustness as vary

        robustness = vary(spec, workload_dir(workload), options, report, names, progress=status.update)
    if wanted[1]:
        from pddplan.optimize.robust import robust_optimize

        chosen = list(names) if names is not None else [result.name for result in report.results]
        day = robust_optimize(spec, workload_dir(workload), options, chosen, progress=status.update)
    return robustness, day


def _check_further_analyses(spec: Any, options: Any, robust_day: bool, survive_kinds: str | None) -> None:
    from pddplan.errors import InputError

    if robust_day:
        from pddplan.optimize.robust import check_robust

        check_robust(spec, options)
    if survive_kinds is not None:
        from pddplan.optimize.survive import KINDS

        kinds = {k.strip() for k in survive_kinds.split(",") if k.strip()}
        if not kinds or kinds - set(KINDS):
            raise InputError(f"--survive = {survive_kinds!r}: expected instance, line or both")


def _survival(spec: Any, workload: str, report: Any, kinds: str) -> list[dict[str, Any]]:
    """`optimize --survive`: each feasible architecture's plan grown to N+1 (`pddplan.optimize.survive`)."""
    from pddplan.errors import InfeasibleError
    from pddplan.inputs import workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.optimize.survive import survive

    wanted = {k.strip() for k in kinds.split(",") if k.strip()}
    inputs = load_input_set(spec, workload_dir(workload))
    out = []
    for result in report.results:
        if result.plan is None:
            continue
        try:
            grown = survive(inputs, result.plan, wanted).to_dict()
            out.append({"architecture": result.name, "feasible": True, "reason": None} | grown)
        except InfeasibleError as error:
            out.append({"architecture": result.name, "feasible": False, "reason": str(error)})
    return out


def chosen_plan(report: Any, day: Any, survival: Any) -> tuple[Any, str] | None:
    """The plan `--output` writes, with words saying which it is: with `--robust`, the cheapest
    purchase that meets every required scenario of the day; with `--survive`, the best
    architecture's plan grown to N+1; else the best plan."""
    from pddplan.specs.plan import Plan

    if day is not None:
        robust = [r for r in day if r.plan is not None and r.cost_usd_per_hour is not None]
        if not robust:
            return None
        winner = min(robust, key=lambda r: r.cost_usd_per_hour)
        return winner.plan, (
            f"the robust purchase ({winner.architecture}, ${winner.cost_usd_per_hour:,.2f}/h, every required "
            "scenario of the day met)"
        )
    best = report.best
    if best is None or best.plan is None:
        return None
    if survival is not None:
        grown = next((s for s in survival if s["architecture"] == best.name and s["feasible"]), None)
        if grown is None:
            return None
        plan = Plan.model_validate(grown["plan"])
        return plan, f"the N+1 plan ({best.name}, ${grown['cost_usd_per_hour']:,.2f}/h, grown to survive a loss)"
    return best.plan, f"the best plan ({best.name})"


def _show_optimize(
    json_out: bool, report: Any, robustness: Any, day: Any, survival: Any = None, written: str | None = None
) -> None:
    from pddplan.report import optimize_report, output

    if json_out:
        extra: dict[str, Any] = {"robustness": robustness.to_dict()} if robustness else {}
        if written is not None:
            extra["output_plan"] = written
        if day is not None:
            extra["robust"] = [r.to_dict() for r in day]
        if survival is not None:
            extra["survive"] = survival
        output.emit_json(report.to_dict() | extra)
        return
    console = output.results()
    optimize_report.print_report(console, report)
    if robustness is not None:
        from pddplan.report import robustness_report

        robustness_report.print_report(console, robustness)
    if day is not None:
        optimize_report.print_robust(console, [r.to_dict() for r in day])
    if survival is not None:
        optimize_report.print_survival_summary(console, survival)
    if written is not None and (day is not None or survival is not None):
        console.print(f"plan for --output: {written}", highlight=False)


def _optimize_report(path: Path | None, workload: str, report: Any, seed: int) -> None:
    """The HTML report of optimize's best plan, the architectures beside it (no path or no plan:
    nothing written)."""
    from pddplan.optimize.run import architecture_figures
    from pddplan.report import output

    best = report.best
    if path is None or best is None or best.scenario is None or best.evaluation is None:
        return
    with output.status("writing the report..."):
        _write_report(
            path,
            workload,
            scenario=best.scenario,
            figures=best.evaluation.to_dict(),
            figures_source="closed form; the plan was verified by simulation",
            architectures=[architecture_figures(r) for r in report.results],
            seed=seed,
        )


def _reasons(results: Any) -> str:
    """Why each architecture failed, one clause per distinct reason naming the architectures it
    stops ("pd-intra, pdd: ..."), so a reason they share is said once."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        reason = "; ".join(dict.fromkeys(item["message"] for item in r.infeasibility)) or "no feasible plan"
        by_reason.setdefault(reason, []).append(r.name)
    if len(by_reason) == 1 and len(results) > 1:
        return f"all architectures: {next(iter(by_reason))}"
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())


# -- CI gate -------------------------------------------------------------------------------------
@app.command("gate")
def gate(
    baseline: Annotated[Path, typer.Argument(help="Baseline JSON with scenarios and committed results.")],
    update: Annotated[bool, typer.Option("--update", help="Rewrite the baseline with the new results.")] = False,
    init: Annotated[
        list[str] | None, typer.Option("--init", help="Create BASELINE from these workloads (repeatable).")
    ] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", help="Relative tolerance for every metric.")] = None,
    tol: Annotated[
        list[str] | None, typer.Option("--tol", help="Per-metric tolerance, e.g. cost_usd_per_hour=0.02 (repeatable).")
    ] = None,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write a PR comment here.")] = None,
    allow_infeasible: Annotated[
        bool, typer.Option("--allow-infeasible", help="With --init/--update: record a scenario with no feasible plan.")
    ] = False,
    accept: Annotated[
        bool, typer.Option("--accept", help="With --update: record regressions and exit 0 (they are accepted).")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Fail (exit 1) when a change makes a scenario's best deployment cost more, lose BCR, or miss its SLA.

    Exit 0 only when every scenario was re-run, is feasible (or recorded infeasible on purpose) and
    is no worse than its baseline; a scenario that cannot run exits 2 with its name."""
    from pddplan.analyses import gate as gating
    from pddplan.errors import GateFailed, InputError
    from pddplan.report import gate_report, output
    from pddplan.specs.baseline import OLD_NAMES, Metric
    from pddplan.support.loading import write_atomic

    overrides: dict[Metric, float] = {}
    for item in tol or []:
        name, _, value = item.partition("=")
        name = OLD_NAMES.get(name, name)
        if name not in ("cost_usd_per_hour", "bcr", "goodput_rps"):
            raise InputError(f"--tol {item!r}: metric must be cost_usd_per_hour, bcr or goodput_rps")
        metric: Metric = name  # type: ignore[assignment]
        try:
            overrides[metric] = float(value)
        except ValueError:
            raise InputError(f"--tol {item!r}: expected METRIC=NUMBER") from None
        if not 0 <= overrides[metric] < math.inf:
            raise InputError(f"--tol {item!r}: tolerance must be a finite number >= 0")
    if rtol is not None and not 0 <= rtol < math.inf:
        raise InputError(f"--rtol = {rtol}: must be a finite number >= 0")
    console, notices = output.results(), output.diagnostics()
    if init:
        if baseline.exists():
            raise InputError(f"{baseline}: exists; --init creates a new baseline, use --update to refresh it")
        with output.status("creating the baseline...") as status:
            fresh = gating.init_baseline(
                baseline, init, progress=lambda text: status.update(text), allow_infeasible=allow_infeasible
            )
        gating.write_baseline(baseline, fresh)
        notices.print(f"wrote {baseline} with {len(fresh.scenarios)} scenario(s)")
        return
    with output.status("gating...") as status:
        spec, checks = gating.gate(
            baseline, progress=lambda text: status.update(text), tolerances=overrides or None, rtol=rtol
        )
    if markdown_path is not None:
        from pddplan.report.gate_report import markdown as gate_markdown

        write_atomic(markdown_path, gate_markdown(checks))
    if json_out:
        output.emit_json(gating.checks_to_dict(checks))
    else:
        gate_report.print_checks(console, checks)
    failed = [c.name for c in checks if c.verdict == "regression"]
    if update:
        gating.write_baseline(baseline, gating.updated(spec, checks, allow_infeasible))
        notices.print(f"updated {baseline}")
        if failed and not accept:
            raise GateFailed(f"recorded regressions in {', '.join(failed)}; pass --accept to record them and pass")
        return
    if failed:
        raise GateFailed(f"cost gate failed for {', '.join(failed)}")
    if any(c.verdict == "improvement" for c in checks):
        notices.print(f"results improved: refresh the baseline with `pddplan gate {baseline} --update`")
