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
    _scenario,
    _trace_replay,
    _traced_scenario,
    _write_report,
)

if TYPE_CHECKING:
    pass


@app.command("evaluate")
def evaluate(
    plan: PlanArg,
    workload: WorkloadArg,
    rate: Annotated[float | None, typer.Option("--rate", help="Requests/s (default: the workload's).")] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Evaluate the trace's traffic instead of the workload's: its rate, burstiness, lengths and joint "
            "prompt/hit mix (hits through --cache-capacity's prefix cache).",
        ),
    ] = None,
    trace_format: TraceFormatOption = "mooncake",
    cache_capacity: TraceCacheOption = None,
    report: ReportOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Closed-form TTFT/TPOT percentiles, goodput, cost and BCR of a plan, and its capacity view."""
    from pddplan.errors import InputError
    from pddplan.evaluate.analytic import evaluate as run
    from pddplan.evaluate.capacity_view import capacity_view
    from pddplan.report import output, plan_tables
    from pddplan.support.limits import check_rate

    if rate is not None:
        check_rate(rate)
    _check_report(report)
    if trace is not None:
        scenario = _traced_scenario(plan, workload, trace, trace_format, cache_capacity)
    elif cache_capacity is not None:
        raise InputError("--cache-capacity goes with --trace")
    else:
        scenario = _scenario(plan, workload)
    result = run(scenario, rate).to_dict()
    result["capacity"] = capacity_view(scenario).to_dict()
    if report is not None:
        _write_report(report, workload, scenario=scenario, figures=result, figures_source="closed form")
    if json_out:
        output.emit_json(result)
    else:
        plan_tables.print_figures(output.results(), scenario, result, "evaluate (closed form)")


@app.command("export")
def export(
    plan: PlanArg,
    workload: WorkloadArg,
    target: Annotated[
        str, typer.Option("--target", help="sglang or vllm (launch scripts), or k8s (Kubernetes manifests).")
    ],
    engine: Annotated[str, typer.Option("--engine", help="With --target k8s: the engine the pods run.")] = "sglang",
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the files into this folder (default: print them).")
    ] = None,
    model_path: Annotated[
        str | None,
        typer.Option("--model-path", help="What the engines load (default: the catalog model's Hugging Face repo)."),
    ] = None,
    gpus_per_node: Annotated[
        int, typer.Option("--gpus-per-node", help="GPUs per server; wider instances span nodes.")
    ] = 8,
    image: Annotated[str | None, typer.Option("--image", help="With --target k8s: the container image.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Engine launch commands (SGLang, vLLM) or Kubernetes manifests that realize a plan."""
    from pddplan.export import export_plan
    from pddplan.export.files import write_files
    from pddplan.report import output

    scenario = _scenario(plan, workload)
    result = export_plan(scenario, target, engine, model_path, gpus_per_node, image)  # type: ignore[arg-type]
    if out is not None:
        for path in write_files(out, result.files):
            output.diagnostics().print(f"wrote {path}", markup=False, highlight=False)
    if json_out:
        output.emit_json(result.to_dict())
    elif out is None:
        console = output.results()
        for name, text in result.files.items():
            console.out(f"==> {name} <==", highlight=False)
            console.out(text, end="", highlight=False)


@app.command("simulate")
def simulate(
    plan: PlanArg,
    workload: WorkloadArg,
    requests: Annotated[int, typer.Option("--requests", help="Requests to simulate.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random draw.")] = 0,
    per_request: Annotated[
        Path | None, typer.Option("--per-request", help="Write per-request records: .csv, or .jsonl (JSON lines).")
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay this trace's first --requests requests (arrivals, prompt and output lengths, hits "
            "through the prefix cache) instead of drawing them from the workload.",
        ),
    ] = None,
    trace_format: TraceFormatOption = "mooncake",
    cache_capacity: TraceCacheOption = None,
    report: ReportOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Request-level simulation: TTFT/TPOT tails per pipeline, utilizations, relay share, goodput."""
    from pddplan.errors import InputError
    from pddplan.report import output, plan_tables
    from pddplan.simulate.summary import record_format, write_records
    from pddplan.simulate.summary import simulate as run
    from pddplan.trace.replay import replay_scenario

    if requests < 1:
        raise InputError(f"--requests = {requests}: must be at least 1")
    if per_request is not None:
        record_format(per_request)  # before the work, not after it
    _check_report(report)
    scenario = _scenario(plan, workload)
    replay = None
    if trace is not None:
        replay = _trace_replay(scenario, trace, trace_format, cache_capacity, requests)
        scenario = replay_scenario(scenario, replay)
        requests = len(replay)
    elif cache_capacity is not None:
        raise InputError("--cache-capacity goes with --trace")
    result = run(scenario, requests, seed, replay)
    if per_request is not None:
        write_records(per_request, result.table)
    if report is not None:
        source = f"simulated, {requests:,} requests, seed {seed}"
        _write_report(
            report,
            workload,
            scenario=scenario,
            figures=result.summary,
            figures_source=source,
            simulation=(result.table, source),
        )
    if json_out:
        output.emit_json(result.summary)
    else:
        plan_tables.print_figures(
            output.results(), scenario, result.summary, f"simulate ({requests:,} requests, seed {seed})"
        )


@app.command("whatif")
def whatif(
    plan: PlanArg,
    workload: WorkloadArg,
    rate: Annotated[
        str | None, typer.Option("--rate", help="Offered rate: a factor of the plan's (x1.5) or requests/s (6).")
    ] = None,
    hit_shift: Annotated[
        float, typer.Option("--hit-shift", help="Move the mean prefix hit by this much (-0.1).")
    ] = 0.0,
    fail: Annotated[
        str | None,
        typer.Option(
            "--fail", help="One failure: line:OPTION (a leased WAN line) or instance:ROLE (prefill, relay, decode)."
        ),
    ] = None,
    simulate_flag: Annotated[
        bool, typer.Option("--simulate", help="Also simulate before and after (--requests, --seed).")
    ] = False,
    requests: Annotated[int, typer.Option("--requests", help="Requests to simulate.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random draw.")] = 0,
    at_s: Annotated[
        float | None,
        typer.Option(
            "--at",
            help="With --fail line:OPTION and --simulate: the line fails this many seconds in; report the "
            "transient (requests in flight, time until the transfers drain).",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """A plan's figures under one change (rate, hit shift, a failed line or instance), beside the
    figures as planned; degraded modes say how the deployment runs and what it sheds."""
    from pddplan.analyses.whatif import check_transient
    from pddplan.analyses.whatif import whatif as run
    from pddplan.errors import InputError
    from pddplan.inputs import load_plan, load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.report import output, plan_tables
    from pddplan.scenarios.failures import Change
    from pddplan.support.limits import check_requests, check_seed

    if rate is None and not hit_shift and fail is None:
        raise InputError("give a change: --rate, --hit-shift or --fail")
    change = Change(rate, hit_shift, fail, at_s)
    check_transient(change, requests if simulate_flag else 0)
    if simulate_flag:
        check_requests(requests)
        check_seed(seed)
    inputs = load_input_set(load_workload(workload), workload_dir(workload))
    with output.status("evaluating..."):
        result = run(inputs, load_plan(plan), change, requests if simulate_flag else 0, seed)
    if json_out:
        output.emit_json(result.to_dict())
    else:
        plan_tables.print_whatif(output.results(), result.to_dict())


@app.command("survive")
def survive(
    plan: PlanArg,
    workload: WorkloadArg,
    kinds: Annotated[
        str, typer.Option("--survive", help="Failures to survive: instance, line, or instance,line.")
    ] = "instance,line",
    output_path: Annotated[Path | None, typer.Option("--output", help="Write the grown plan here (YAML).")] = None,
    degraded_sla: Annotated[
        float,
        typer.Option(
            "--degraded-sla", help="After a failure, meet the SLA's targets times this factor (1: the full SLA)."
        ),
    ] = 1.0,
    json_out: JsonFlag = False,
) -> None:
    """N+1: grow a plan until it meets its SLA (or a degraded one) after losing any one instance
    (of any role) or any one WAN line; print what was added and the price of it."""
    from pddplan.inputs import load_plan, load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.optimize.survive import check_degraded_sla
    from pddplan.optimize.survive import survive as run
    from pddplan.report import output, plan_tables

    check_degraded_sla(degraded_sla)
    inputs = load_input_set(load_workload(workload), workload_dir(workload))
    with output.status("checking every single failure..."):
        result = run(inputs, load_plan(plan), {k.strip() for k in kinds.split(",") if k.strip()}, degraded_sla)
    if output_path is not None:
        import yaml

        from pddplan.support.loading import write_atomic

        header = f"# {Path(plan).name} grown by `pddplan survive --survive {kinds}` to survive any single failure.\n"
        write_atomic(output_path, header + yaml.safe_dump(result.plan.model_dump(mode="json"), sort_keys=False))
        output.diagnostics().print(f"wrote {output_path}", markup=False, highlight=False)
    if json_out:
        output.emit_json(result.to_dict())
    else:
        plan_tables.print_survival(output.results(), result.to_dict())
