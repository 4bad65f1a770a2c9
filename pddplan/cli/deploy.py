"""`pddplan evaluate`, `simulate`, `export`, `whatif`, `survive`: one plan, its figures and its launch files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import (
    JsonFlag,
    PlanArg,
    ReportOption,
    TraceCacheOption,
    TraceFormatOption,
    WorkloadArg,
    _check_report,
    _progress,
    _write_report,
)

if TYPE_CHECKING:
    pass


# -- evaluate -------------------------------------------------------------------------------------
EvaluateRateOption = Annotated[float | None, typer.Option("--rate", help="Requests/s (default: the workload's).")]
EvaluateTraceOption = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Evaluate the trace's traffic instead of the workload's: its rate, burstiness, lengths and joint "
        "prompt/hit mix (hits through --cache-capacity's prefix cache).",
    ),
]


@app.command("evaluate")
def evaluate(
    plan: PlanArg,
    workload: WorkloadArg,
    rate: EvaluateRateOption = None,
    trace: EvaluateTraceOption = None,
    trace_format: TraceFormatOption = "mooncake",
    cache_capacity: TraceCacheOption = None,
    report: ReportOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Closed-form TTFT/TPOT percentiles, goodput, cost and BCR of a plan, and its capacity view."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.evaluate.command import EvaluateFlags
    from pddplan.report import output, plan_tables

    flags = EvaluateFlags(**given)
    _check_report(report)
    with _progress() as progress:
        scenario, result = flags.evaluate(progress)
    if report is not None:
        _write_report(report, workload, scenario=scenario, figures=result, figures_source="closed form")
    if json_out:
        output.emit_json(result)
    else:
        plan_tables.print_figures(output.results(), scenario, result, "evaluate (closed form)")


# -- export ---------------------------------------------------------------------------------------
TargetOption = Annotated[
    str, typer.Option("--target", help="sglang or vllm (launch scripts), or k8s (Kubernetes manifests).")
]
EngineOption = Annotated[str, typer.Option("--engine", help="With --target k8s: the engine the pods run.")]
ExportOutOption = Annotated[
    Path | None, typer.Option("--out", help="Write the files into this folder (default: print them).")
]
ModelPathOption = Annotated[
    str | None,
    typer.Option("--model-path", help="What the engines load (default: the catalog model's Hugging Face repo)."),
]
GpusPerNodeOption = Annotated[int, typer.Option("--gpus-per-node", help="GPUs per server; wider instances span nodes.")]
ImageOption = Annotated[str | None, typer.Option("--image", help="With --target k8s: the container image.")]


@app.command("export")
def export(
    plan: PlanArg,
    workload: WorkloadArg,
    target: TargetOption,
    engine: EngineOption = "sglang",
    out: ExportOutOption = None,
    model_path: ModelPathOption = None,
    gpus_per_node: GpusPerNodeOption = 8,
    image: ImageOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Engine launch commands (SGLang, vLLM) or Kubernetes manifests that realize a plan."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.export.command import ExportFlags
    from pddplan.report import output

    flags = ExportFlags(**given)
    result = flags.export()
    for path in flags.write(result):
        output.wrote(path)
    if json_out:
        output.emit_json(result.to_output())
    elif out is None:
        console = output.results()
        for name, text in result.files.items():
            console.out(f"==> {name} <==", highlight=False)
            console.out(text, end="", highlight=False)


# -- simulate -------------------------------------------------------------------------------------
RequestsOption = Annotated[int, typer.Option("--requests", help="Requests to simulate.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of every random draw.")]
PerRequestOption = Annotated[
    Path | None, typer.Option("--per-request", help="Write per-request records: .csv, or .jsonl (JSON lines).")
]
SimulateTraceOption = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Replay this trace's first --requests requests (arrivals, prompt and output lengths, hits "
        "through the prefix cache) instead of drawing them from the workload.",
    ),
]


@app.command("simulate")
def simulate(
    plan: PlanArg,
    workload: WorkloadArg,
    requests: RequestsOption = 20_000,
    seed: SeedOption = 0,
    per_request: PerRequestOption = None,
    trace: SimulateTraceOption = None,
    trace_format: TraceFormatOption = "mooncake",
    cache_capacity: TraceCacheOption = None,
    report: ReportOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Request-level simulation: TTFT/TPOT tails per pipeline, utilizations, relay share, goodput."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.report import output, plan_tables
    from pddplan.simulate.command import SimulateFlags

    flags = SimulateFlags(**given)
    _check_report(report)
    with _progress() as progress:
        run = flags.prepare(progress)
    result = flags.simulate(run)
    if per_request is not None:
        output.wrote(per_request)
    if report is not None:
        _write_report(
            report,
            workload,
            scenario=run.scenario,
            figures=result.summary,
            figures_source=run.source,
            simulation=(result.table, run.source),
        )
    if json_out:
        output.emit_json(result.summary)
    else:
        title = f"simulate ({run.requests:,} requests, seed {seed})"
        plan_tables.print_figures(output.results(), run.scenario, result.summary, title)


# -- whatif ---------------------------------------------------------------------------------------
WhatifRateOption = Annotated[
    str | None, typer.Option("--rate", help="Offered rate: a factor of the plan's (x1.5) or requests/s (6).")
]
HitShiftOption = Annotated[float, typer.Option("--hit-shift", help="Move the mean prefix hit by this much (-0.1).")]
FailOption = Annotated[
    str | None,
    typer.Option(
        "--fail", help="One failure: line:OPTION (a leased WAN line) or instance:ROLE (prefill, relay, decode)."
    ),
]
SimulateFlagOption = Annotated[
    bool, typer.Option("--simulate", help="Also simulate before and after (--requests, --seed).")
]
AtOption = Annotated[
    float | None,
    typer.Option(
        "--at",
        help="With --fail line:OPTION and --simulate: the line fails this many seconds in; report the "
        "transient (requests in flight, time until the transfers drain).",
    ),
]


@app.command("whatif")
def whatif(
    plan: PlanArg,
    workload: WorkloadArg,
    rate: WhatifRateOption = None,
    hit_shift: HitShiftOption = 0.0,
    fail: FailOption = None,
    simulate_flag: SimulateFlagOption = False,
    requests: RequestsOption = 20_000,
    seed: SeedOption = 0,
    at_s: AtOption = None,
    json_out: JsonFlag = False,
) -> None:
    """A plan's figures under one change (rate, hit shift, a failed line or instance), beside the
    figures as planned; degraded modes say how the deployment runs and what it sheds."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses.whatif import WhatifFlags
    from pddplan.report import output, plan_tables

    flags = WhatifFlags(**given)
    with _progress() as progress:
        result = flags.run(progress)
    if json_out:
        output.emit_json(result)
    else:
        plan_tables.print_whatif(output.results(), result.json_data())


# -- survive --------------------------------------------------------------------------------------
SurviveKindsOption = Annotated[
    str, typer.Option("--survive", help="Failures to survive: instance, line, or both (instance,line).")
]
GrownPlanOption = Annotated[Path | None, typer.Option("--output", help="Write the grown plan here (YAML).")]
DegradedSlaOption = Annotated[
    float,
    typer.Option("--degraded-sla", help="After a failure, meet the SLA's targets times this factor (1: the full SLA)."),
]


@app.command("survive")
def survive(
    plan: PlanArg,
    workload: WorkloadArg,
    kinds: SurviveKindsOption = "instance,line",
    output_path: GrownPlanOption = None,
    degraded_sla: DegradedSlaOption = 1.0,
    json_out: JsonFlag = False,
) -> None:
    """N+1: grow a plan until it meets its SLA (or a degraded one) after losing any one instance
    (of any role) or any one WAN line; print what was added and the price of it."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.optimize.survive import SurviveFlags
    from pddplan.report import output, plan_tables

    flags = SurviveFlags(**given)
    with _progress() as progress:
        result = flags.run(progress)
    written = flags.write_plan(result)
    if written is not None:
        output.wrote(written)
    if json_out:
        output.emit_json(result.to_output())
    else:
        plan_tables.print_survival(output.results(), result.to_output().json_data())
