"""`pddplan trace import`, `cache-curve`, `cache-plan`: request traces and the prefix cache they call for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app, trace_app
from pddplan.cli.options import JsonFlag, _progress

if TYPE_CHECKING:
    from pddplan.trace.command import CacheCurveFlags, CacheSizes


# -- trace import ---------------------------------------------------------------------------------
TraceArg = Annotated[Path, typer.Argument(help="The trace file (streamed: any size).")]
ImportFormatOption = Annotated[str, typer.Option("--format", help="mooncake (JSON lines), csv or azure.")]
ImportBlockTokensOption = Annotated[
    int, typer.Option("--block-tokens", help="Tokens per hashed prompt block (Mooncake: 512).")
]
WorkloadOutOption = Annotated[
    Path | None,
    typer.Option(
        "--workload-out",
        help="Also write a workload: the trace's joint prompt/hit mix, outputs and arrivals, with --like's "
        "model, SLA, prices and deployment.",
    ),
]
ImportLikeOption = Annotated[
    str | None, typer.Option("--like", help="With --workload-out: the workload the rest is taken from.")
]
ImportCacheOption = Annotated[
    str | None,
    typer.Option(
        "--cache-capacity",
        help="With --workload-out: the prefix cache the hits are replayed through, bytes (100GB) or tokens "
        "(5Mtok); default unbounded.",
    ),
]
ImportEvictionOption = Annotated[str, typer.Option("--eviction", help="With --cache-capacity: lru or lfu.")]
ImportTierOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tier",
        help="With --workload-out, instead of --cache-capacity: a cache tier NAME:CAPACITY[:BANDWIDTH], fastest "
        "first (repeatable); hits from slower tiers carry their load time into the workload.",
    ),
]


@trace_app.command("import")
def trace_import(
    trace: TraceArg,
    fmt: ImportFormatOption = "mooncake",
    block_tokens: ImportBlockTokensOption = 512,
    workload_out: WorkloadOutOption = None,
    like: ImportLikeOption = None,
    cache_capacity: ImportCacheOption = None,
    eviction: ImportEvictionOption = "lru",
    tier: ImportTierOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Summarize a request trace: count, rate, burstiness (inter-arrival CV, per-minute peak to
    mean), prompt and output length histograms, and the prefix hit rate an unbounded cache would
    see (with block hashes), with its correlation to prompt length. With --workload-out, turn it
    into a workload file."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.report import output, trace_tables
    from pddplan.trace.command import TraceImportFlags

    flags = TraceImportFlags(**given)
    with _progress() as progress:
        summary = flags.summary(progress)
        written = flags.write_workload(progress)
    if written is not None:
        output.wrote(written)
    if json_out:
        output.emit_json(summary)
    else:
        trace_tables.print_trace(output.results(), summary.json_data())


# -- cache-plan -----------------------------------------------------------------------------------
HashedTraceArg = Annotated[Path, typer.Argument(help="The trace file (with prompt block hashes).")]
HashedFormatOption = Annotated[str, typer.Option("--format", help="mooncake (JSON lines) or csv (with hash_ids).")]
PlanLikeOption = Annotated[
    str, typer.Option("--like", help="The workload whose model, SLA, prices and deployment apply.")
]
PricedCapacityOption = Annotated[
    str, typer.Option("--capacity", help="Cache capacities to price: bytes (0,100GB,1TiB) or tokens (0,5Mtok).")
]
UsdPerGbMonthOption = Annotated[
    float | None,
    typer.Option(
        "--usd-per-gb-month",
        help="What a GB of prefix cache costs you a month (DRAM, SSD or a KV store); default: the workload's "
        "deployment.prefix_cache.",
    ),
]
CachePlanArchitectureOption = Annotated[
    list[str] | None, typer.Option("--architecture", "-a", help="Architecture (repeatable); default: all.")
]
CachePlanRateOption = Annotated[
    float | None, typer.Option("--rate", help="Cheapest plan for this rate instead of best BCR.")
]


@app.command("cache-plan")
def cache_plan(
    trace: HashedTraceArg,
    like: PlanLikeOption,
    capacity: PricedCapacityOption,
    usd_per_gb_month: UsdPerGbMonthOption = None,
    architecture: CachePlanArchitectureOption = None,
    rate: CachePlanRateOption = None,
    fmt: HashedFormatOption = "mooncake",
    json_out: JsonFlag = False,
) -> None:
    """How much prefix cache to buy: the best deployment for the trace's traffic at each cache
    capacity, priced with the cache, and the marginal value of each step."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.analyses.cache_plan import CachePlanFlags, run_request
    from pddplan.report import output, trace_tables

    request = CachePlanFlags(**given).request()
    with output.status("pricing cache capacities...") as status:
        data = run_request(request, progress=status.update).to_output()
    if json_out:
        output.emit_json(data)
    else:
        trace_tables.print_cache_plan(output.results(), data.json_data())


# -- cache-curve ----------------------------------------------------------------------------------
CurveCapacityOption = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        help="Capacities: bytes (1GB,10GiB, with --model) or tokens ('1M tokens',10Mtok); 10G alone is refused.",
    ),
]
CurveTierOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tier",
        help="Instead of --capacity: a tier NAME:CAPACITY[:BANDWIDTH], fastest first (repeatable), e.g. "
        "--tier hbm:100GB --tier dram:1TB:50GB/s --tier ssd:20TB:6GB/s; reports each tier's hits and "
        "the load time (needs --model).",
    ),
]
CurveModelOption = Annotated[
    str | None, typer.Option("--model", help="Model whose KV bytes per token turn bytes into tokens.")
]
CurveBlockTokensOption = Annotated[int, typer.Option("--block-tokens", help="Tokens per hashed block.")]
CurveEvictionOption = Annotated[str, typer.Option("--eviction", help="lru or lfu.")]
InstancesOption = Annotated[
    int, typer.Option("--instances", help="Split the capacity into one cache per prefill instance.")
]
RoutingOption = Annotated[str, typer.Option("--routing", help="With --instances: affinity or round-robin.")]
HtmlOption = Annotated[Path | None, typer.Option("--html", help="Also write the chart as an HTML page.")]
PngOption = Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")]
SvgOption = Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")]


@app.command("cache-curve")
def cache_curve(
    trace: HashedTraceArg,
    capacity: CurveCapacityOption = None,
    tier: CurveTierOption = None,
    model: CurveModelOption = None,
    fmt: HashedFormatOption = "mooncake",
    block_tokens: CurveBlockTokensOption = 512,
    eviction: CurveEvictionOption = "lru",
    instances: InstancesOption = 1,
    routing: RoutingOption = "affinity",
    html_path: HtmlOption = None,
    png: PngOption = None,
    svg: SvgOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Prefix hit rate against cache capacity, replaying the trace's block hashes (LRU or LFU; one
    pooled cache, or one per prefill instance), token- and request-weighted."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.report import output, trace_tables
    from pddplan.report.chart_files import write_charts
    from pddplan.support.images import check_image_outputs
    from pddplan.trace.command import CacheCurveFlags

    flags = CacheCurveFlags(**given)
    sizes = flags.sizes()
    if sizes.tiers:
        _show_tiers(flags, sizes)
        return
    check_image_outputs(png, svg)
    with output.status("replaying the trace..."):
        data = flags.curve(sizes)
    write_charts([trace_tables.curve_chart(data.json_data())], f"prefix cache: {trace.name}", [], png, svg, html_path)
    if json_out:
        output.emit_json(data)
    else:
        trace_tables.print_curve(output.results(), data.json_data())


def _show_tiers(flags: CacheCurveFlags, sizes: CacheSizes) -> None:
    """`cache-curve --tier ...`: replay the trace through the tier chain, then print what each tier
    served (JSON with `--json`)."""
    from pddplan.report import output, trace_tables

    with output.status("replaying the trace through the tiers..."):
        data = flags.tiered(sizes)
    if flags.json_out:
        output.emit_json(data)
    else:
        trace_tables.print_tiers(output.results(), data.json_data())
