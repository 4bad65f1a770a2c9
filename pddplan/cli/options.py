"""Options and arguments several commands share, and the small steps they share (read a plan and
its workload, write a report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

if TYPE_CHECKING:
    from pddplan.optimize.options import RelayPlacement


JsonFlag = Annotated[bool, typer.Option("--json", help="Write machine-readable JSON to stdout, nothing else.")]


JobsOption = Annotated[int, typer.Option("--jobs", "-j", help="Parallel workers.")]


TraceFormatOption = Annotated[str, typer.Option("--trace-format", help="With --trace: mooncake or csv.")]


TraceCacheOption = Annotated[
    str | None,
    typer.Option(
        "--cache-capacity", help="With --trace: the prefix cache, bytes (100GB) or tokens; default unbounded."
    ),
]


BackendOption = Annotated[str, typer.Option("--backend", help="loky (default), threading, dask or ray.")]


SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        "--address",
        help="dask scheduler or ray cluster address (default: a local cluster of --jobs workers).",
    ),
]


ArchitectureOption = Annotated[
    list[str] | None,
    typer.Option("--architecture", "-a", help="Architecture (repeatable); default: all `pddplan architectures` lists."),
]


KvDtypeOption = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype: bf16 or fp8.")]


def _kv_dtype(value: str | None) -> Any:
    from pddplan.errors import InputError

    if value not in (None, "bf16", "fp8"):
        raise InputError(f"--kv-dtype = {value!r}: expected bf16 or fp8")
    return value


def _architecture_names(given: list[str] | None) -> list[str]:
    """The --architecture values, checked against the registry (default: every architecture)."""
    from pddplan import architectures
    from pddplan.errors import InputError

    for name in given or []:
        if name not in architectures.names():
            raise InputError(f"--architecture = {name!r}: expected one of {', '.join(architectures.names())}")
    return list(given) if given else list(architectures.names())


def _layout_flag(ep: bool | None, tp_attention: bool) -> bool | Literal["tp-attention"] | None:
    """--ep/--no-ep and --tp-attention as `estimate`'s expert_parallel value."""
    from pddplan.errors import InputError

    if not tp_attention:
        return ep
    if ep is False:
        raise InputError("--tp-attention with --no-ep: tensor-parallel attention is a layout of expert parallelism")
    return "tp-attention"


# -- deployments ----------------------------------------------------------------------------------
PlanArg = Annotated[str, typer.Argument(help="Plan file (YAML/JSON), e.g. written by `optimize --output`.")]


WorkloadArg = Annotated[str, typer.Argument(help="Workload name (see `pddplan workloads list`) or YAML file.")]


ReportOption = Annotated[
    Path | None,
    typer.Option(
        "--report",
        help="Also write an HTML report of the plan here: deployment, figures, cost, TTFT/TPOT "
        "distributions, sensitivity, inputs (one offline file).",
    ),
]


def _write_report(path: Path, workload: str, **parts: Any) -> None:
    """Build the plan report (`pddplan.report.plan_report`) and write it atomically."""
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.report import output
    from pddplan.report.plan_report import plan_report
    from pddplan.support.loading import write_atomic

    inputs = load_input_set(load_workload(workload), workload_dir(workload))
    write_atomic(path, plan_report(inputs=inputs, **parts))
    output.diagnostics().print(f"wrote the report to {path}")


def _check_report(path: Path | None) -> None:
    if path is not None:
        from pddplan.report.plan_report import check_report_path

        check_report_path(path)


def _scenario(plan: str, workload: str) -> Any:
    from pddplan.api import scenario_of

    return scenario_of(plan, workload)


def _traced_scenario(plan: str, workload: str, trace: Path, fmt: str, cache_capacity: str | None) -> Any:
    """`plan` on `workload`'s deployment, serving the trace's traffic (`workload_from_trace`)."""
    from pddplan.errors import InputError
    from pddplan.inputs import load_plan, load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.report import output
    from pddplan.scenarios.scenario import build_scenario
    from pddplan.trace.workload import CacheChoice, workload_from_trace

    if fmt not in ("mooncake", "csv"):
        raise InputError(f"--trace-format = {fmt!r}: expected mooncake or csv (hits need block hashes)")
    with output.status(f"reading {trace}..."):
        built = workload_from_trace(trace, fmt, load_workload(workload), CacheChoice(cache_capacity))
    inputs = load_input_set(built.workload, workload_dir(workload))
    return build_scenario(load_plan(plan), inputs, source=plan)


def _trace_replay(scenario: Any, trace: Path, fmt: str, cache_capacity: str | None, requests: int) -> Any:
    """`simulate --trace`: the trace's first `requests` requests with their hits at the cache."""
    from pddplan.errors import InputError
    from pddplan.perf.kv import kv_bytes_per_token
    from pddplan.report import output
    from pddplan.trace.curve import MAX_CAPACITY_TOKENS, parse_capacities
    from pddplan.trace.replay import load_replay

    if fmt not in ("mooncake", "csv"):
        raise InputError(f"--trace-format = {fmt!r}: expected mooncake or csv (a replay needs block hashes)")
    tokens = MAX_CAPACITY_TOKENS
    if cache_capacity is not None:
        capacities = parse_capacities(cache_capacity, kv_bytes_per_token(scenario.model))
        if len(capacities) != 1:
            raise InputError(f"--cache-capacity = {cache_capacity!r}: give one capacity")
        tokens = capacities[0].tokens
    with output.status(f"reading {trace}..."):
        return load_replay(trace, fmt, int(tokens // 512), requests)  # type: ignore[arg-type]


def _relay_placement(value: str) -> RelayPlacement:
    """The --relay flag's value, checked."""
    from pddplan.errors import InputError
    from pddplan.optimize.options import RELAY_PLACEMENTS

    for placement in RELAY_PLACEMENTS:
        if value == placement:
            return placement
    raise InputError(f"--relay = {value!r}: expected one of {', '.join(RELAY_PLACEMENTS)}")


# -- curves ---------------------------------------------------------------------------------------
def _write_charts(
    charts: Any, title: str, notes: list[str], png: Path | None, svg: Path | None, html: Path | None
) -> None:
    from pddplan.report import charts as drawing
    from pddplan.support.loading import write_atomic, write_atomic_bytes

    if html is not None:
        write_atomic(html, drawing.html_page(title, charts, notes))
    if png is not None:
        write_atomic_bytes(png, drawing.image(charts, title, "png"))
    if svg is not None:
        write_atomic_bytes(svg, drawing.image(charts, title, "svg"))


def _check_image_outputs(png: Path | None, svg: Path | None) -> None:
    """Fail before the work when --png/--svg cannot be drawn (matplotlib missing)."""
    from pddplan.report.charts import require_image_support

    for fmt, path in (("png", png), ("svg", svg)):
        if path is not None:
            require_image_support(fmt)
