"""The commands as library calls, by file path or catalog name (what `pddplan.<name>` exposes).

    import pddplan
    report = pddplan.optimize_workload("workloads/pdd-agent-64k.yaml")
    print(report.best.name, report.best.evaluation.cost_per_hour)
    evaluation = pddplan.evaluate_plan("examples/plans/pdd-agent-64k-pdd.yaml", "pdd-agent-64k")

Each returns the objects the CLI renders; their typed results (`.to_output()`, a simulation's
`.summary`) are pydantic models, and `.json_data()` of one is what `--json` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pddplan.analyses.agreement import AgreementFlags, AgreementRow
from pddplan.analyses.bathtub import Bathtub, BathtubFlags, mark_trace
from pddplan.analyses.bathtub import run_request as run_bathtub
from pddplan.analyses.cache_plan import CachePlan, CachePlanFlags
from pddplan.analyses.cache_plan import run_request as run_cache_plan
from pddplan.analyses.gate import Gate, GateFlags
from pddplan.analyses.gate import gate as gate_checks
from pddplan.analyses.gate import outcome as gate_outcome
from pddplan.analyses.paper import Paper, PaperFlags
from pddplan.analyses.sweep import Sweep, SweepFlags
from pddplan.analyses.sweep import run_request as run_sweep
from pddplan.analyses.whatif import WhatifFlags, WhatIfOutput
from pddplan.architectures import describe
from pddplan.architectures.base import ArchitectureInfo
from pddplan.calibration.accuracy import AccuracyFlags
from pddplan.calibration.command import CalibrateFlags
from pddplan.calibration.estimate import EstimateFlags
from pddplan.calibration.outputs import Accuracy, Calibrate, Estimate
from pddplan.evaluate.analytic import Evaluation
from pddplan.evaluate.analytic import evaluate as _evaluate
from pddplan.evaluate.command import EvaluateFlags
from pddplan.evaluate.outputs import Evaluation as EvaluationOutput
from pddplan.export.command import ExportFlags
from pddplan.export.outputs import Export as ExportOutput
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.browse import (
    hardware_details,
    hardware_rows,
    model_details,
    model_rows,
    workload_details,
    workload_rows,
)
from pddplan.inputs.input_set import load_input_set
from pddplan.inputs.outputs import Catalog
from pddplan.optimize.command import OptimizeFlags, architecture_names, run_request
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.outputs import Optimize, Survive
from pddplan.optimize.run import OptimizeReport
from pddplan.optimize.run import optimize as _optimize
from pddplan.optimize.survive import SurviveFlags
from pddplan.report.schemas import SchemaFlags
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.command import SimulateFlags
from pddplan.simulate.outputs import Simulation as SimulationOutput
from pddplan.simulate.summary import Simulation
from pddplan.simulate.summary import simulate as _simulate
from pddplan.trace.command import CacheCurveFlags, TraceImportFlags
from pddplan.trace.outputs import CacheCurve, TraceImport


def scenario_of(plan: str | Path, workload: str | Path) -> Scenario:
    """A plan file resolved against a workload (file or shipped name)."""
    inputs = load_input_set(load_workload(str(workload)), workload_dir(str(workload)))
    return build_scenario(load_plan(str(plan)), inputs, source=str(plan))


def optimize_workload(
    workload: str | Path, architectures: Sequence[str] | None = None, **options: Any
) -> OptimizeReport:
    """`pddplan optimize WORKLOAD`: `architectures` a name or names (default: every one), `options`
    `OptimizeOptions` fields (rate or budget_per_hour, which set the mode as --rate and --budget
    do; verify_requests, seed, verify, early_stop, jobs, ...)."""
    names = architecture_names([architectures] if isinstance(architectures, str) else architectures)
    return _optimize(load_workload(str(workload)), workload_dir(str(workload)), OptimizeOptions(**options), names)


def evaluate_plan(plan: str | Path, workload: str | Path, rate_rps: float | None = None) -> Evaluation:
    """`pddplan evaluate PLAN WORKLOAD`: the closed-form figures."""
    return _evaluate(scenario_of(plan, workload), rate_rps)


def simulate_plan(plan: str | Path, workload: str | Path, requests: int = 20_000, seed: int = 0) -> Simulation:
    """`pddplan simulate PLAN WORKLOAD`: the request-level simulation (`.summary`, its typed result)."""
    return _simulate(scenario_of(plan, workload), requests, seed)


# -- every command, by its options ----------------------------------------------------------------
# Each function below takes the command's options by the parameter names of its `*Flags` object
# (the command line's, `--json` aside), runs what the command runs, writes the files its options
# name, and returns the typed result `--json` prints (`.json_data()`). Every check is the Flags'.


def optimize(workload: str, **options: Any) -> Optimize:
    """`pddplan optimize WORKLOAD` (`OptimizeFlags`), with `--output`'s plan written."""
    request = OptimizeFlags(workload=workload, **options).request()
    outcome = run_request(request)
    return outcome.to_output(outcome.write_plan(options.get("output_plan"), request.spec.name))


def evaluate(plan: str, workload: str, **options: Any) -> EvaluationOutput:
    """`pddplan evaluate PLAN WORKLOAD` (`EvaluateFlags`)."""
    return EvaluateFlags(plan=plan, workload=workload, **options).evaluate()[1]


def simulate(plan: str, workload: str, **options: Any) -> SimulationOutput:
    """`pddplan simulate PLAN WORKLOAD` (`SimulateFlags`), `--per-request` written."""
    flags = SimulateFlags(plan=plan, workload=workload, **options)
    return flags.simulate(flags.prepare()).summary


def estimate(model: str, gpu: str, tp: int, **options: Any) -> Estimate:
    """`pddplan estimate` (`EstimateFlags`)."""
    return EstimateFlags(model=model, gpu=gpu, tp=tp, **options).estimate()


def accuracy(**options: Any) -> Accuracy:
    """`pddplan accuracy` (`AccuracyFlags`): `folds` adds the cross-validation."""
    flags = AccuracyFlags(**options)
    return flags.cross_validated(flags.report())


def calibrate(files: Sequence[str | Path], **options: Any) -> Calibrate:
    """`pddplan calibrate` (`CalibrateFlags`): the fit, with the rows and the profile its options
    name written."""
    flags = CalibrateFlags(files=[Path(f) for f in files], **options)
    fit = flags.fit()
    flags.write_rows(fit)
    flags.write_profile(fit)
    return fit.to_output(flags.output_path)


def export(plan: str, workload: str, target: str, **options: Any) -> ExportOutput:
    """`pddplan export` (`ExportFlags`), the files written into `out` when given."""
    flags = ExportFlags(plan=plan, workload=workload, target=target, **options)
    result = flags.export()
    flags.write(result)
    return result.to_output()


def whatif(plan: str, workload: str, **options: Any) -> WhatIfOutput:
    """`pddplan whatif` (`WhatifFlags`): `rate` as on the command line ('x1.5', '6') or a number
    of requests/s."""
    if isinstance(options.get("rate"), int | float):
        options["rate"] = repr(options["rate"])
    return WhatifFlags(plan=plan, workload=workload, **options).run()


def survive(plan: str, workload: str, **options: Any) -> Survive:
    """`pddplan survive` (`SurviveFlags`), the grown plan written to `output_path` when given."""
    flags = SurviveFlags(plan=plan, workload=workload, **options)
    result = flags.run()
    flags.write_plan(result)
    return result.to_output()


def bathtub(workload: str, **options: Any) -> Bathtub:
    """`pddplan bathtub` (`BathtubFlags`), marked by the trace its options name."""
    request = BathtubFlags(workload=workload, **options).request()
    return mark_trace(request, run_bathtub(request)).to_output()


def sweep(workload: str, param: str, **options: Any) -> Sweep:
    """`pddplan sweep` (`SweepFlags`)."""
    return run_sweep(SweepFlags(workload=workload, param=param, **options).request()).to_output()


def paper(**options: Any) -> Paper:
    """`pddplan paper` (`PaperFlags`)."""
    return PaperFlags(**options).compare()


def agreement(**options: Any) -> list[AgreementRow]:
    """`pddplan agreement` (`AgreementFlags`)."""
    return AgreementFlags(**options).agreement()


def gate(baseline: str | Path, **options: Any) -> Gate:
    """`pddplan gate BASELINE`: each scenario re-optimized against its committed result (its
    `passed` says whether the gate passes; `--update` and `--init` stay on the command line)."""
    baseline = Path(baseline)
    flags = GateFlags(baseline=baseline, **options)
    _, checks = gate_checks(baseline, tolerances=flags.tolerances() or None, rtol=flags.rtol)
    return gate_outcome(checks)


def trace_import(trace: str | Path, **options: Any) -> TraceImport:
    """`pddplan trace import` (`TraceImportFlags`), the workload written to `workload_out` when given."""
    flags = TraceImportFlags(trace=Path(trace), **options)
    summary = flags.summary()
    flags.write_workload()
    return summary


def cache_plan(trace: str | Path, like: str, capacity: str, **options: Any) -> CachePlan:
    """`pddplan cache-plan` (`CachePlanFlags`)."""
    flags = CachePlanFlags(trace=Path(trace), like=like, capacity=capacity, **options)
    return run_cache_plan(flags.request()).to_output()


def cache_curve(trace: str | Path, **options: Any) -> CacheCurve:
    """`pddplan cache-curve` (`CacheCurveFlags`): the curve, or with `tier` the tiered cache."""
    flags = CacheCurveFlags(trace=Path(trace), **options)
    sizes = flags.sizes()
    return flags.tiered(sizes) if sizes.tiers else flags.curve(sizes)


def architectures() -> list[ArchitectureInfo]:
    """`pddplan architectures`."""
    return describe()


def hardware_list() -> list[Catalog]:
    """`pddplan hardware list`."""
    return hardware_rows()


def hardware_show(name: str) -> Catalog:
    """`pddplan hardware show NAME`."""
    return hardware_details(name)


def models_list(kv_dtype: str | None = None) -> list[Catalog]:
    """`pddplan models list`."""
    return model_rows(kv_dtype)


def models_show(name: str, kv_dtype: str | None = None) -> Catalog:
    """`pddplan models show NAME`."""
    return model_details(name, kv_dtype)


def workloads_list() -> list[Catalog]:
    """`pddplan workloads list`."""
    return workload_rows()


def workloads_show(name: str) -> Catalog:
    """`pddplan workloads show NAME`."""
    return workload_details(name)


def schema(**options: Any) -> list[Path]:
    """`pddplan schema` (`SchemaFlags`): the schema files written."""
    return list(SchemaFlags(**options).written())
