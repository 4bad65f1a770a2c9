"""`pddplan trace import`, `cache-curve`, `cache-plan`: request traces and the prefix cache they call for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pddplan.cli.apps import app, trace_app
from pddplan.cli.options import JsonFlag, _check_image_outputs, _write_charts

if TYPE_CHECKING:
    pass


@trace_app.command("import")
def trace_import(
    trace: Annotated[Path, typer.Argument(help="The trace file (streamed: any size).")],
    fmt: Annotated[str, typer.Option("--format", help="mooncake (JSON lines), csv or azure.")] = "mooncake",
    block_tokens: Annotated[
        int, typer.Option("--block-tokens", help="Tokens per hashed prompt block (Mooncake: 512).")
    ] = 512,
    workload_out: Annotated[
        Path | None,
        typer.Option(
            "--workload-out",
            help="Also write a workload: the trace's joint prompt/hit mix, outputs and arrivals, with --like's "
            "model, SLA, prices and deployment.",
        ),
    ] = None,
    like: Annotated[
        str | None, typer.Option("--like", help="With --workload-out: the workload the rest is taken from.")
    ] = None,
    cache_capacity: Annotated[
        str | None,
        typer.Option(
            "--cache-capacity",
            help="With --workload-out: the prefix cache the hits are replayed through, bytes (100GB) or tokens "
            "(5M); default unbounded.",
        ),
    ] = None,
    eviction: Annotated[str, typer.Option("--eviction", help="With --cache-capacity: lru or lfu.")] = "lru",
    tier: Annotated[
        list[str] | None,
        typer.Option(
            "--tier",
            help="With --workload-out, instead of --cache-capacity: a cache tier NAME:CAPACITY[:BANDWIDTH], fastest "
            "first (repeatable); hits from slower tiers carry their load time into the workload.",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Summarize a request trace: count, rate, burstiness (inter-arrival CV, per-minute peak to
    mean), prompt and output length histograms, and the prefix hit rate an unbounded cache would
    see (with block hashes), with its correlation to prompt length. With --workload-out, turn it
    into a workload file."""
    from pddplan.errors import InputError
    from pddplan.report import output, trace_tables
    from pddplan.support.limits import check_tokens
    from pddplan.trace.prefetch import stream_trace
    from pddplan.trace.read import FORMATS
    from pddplan.trace.stats import summarize

    chosen = next((name for name in FORMATS if name == fmt), None)
    if chosen is None:
        raise InputError(f"--format = {fmt!r}: expected one of {', '.join(FORMATS)}")
    check_tokens(block_tokens, "--block-tokens", 1)
    if (workload_out is None) != (like is None):
        raise InputError("--workload-out and --like go together: the trace gives the traffic, --like the rest")
    if (cache_capacity is not None or tier) and workload_out is None:
        raise InputError("--cache-capacity and --tier go with --workload-out")
    with output.status(f"reading {trace}..."):
        summary = summarize(stream_trace(trace, chosen, block_tokens), block_tokens).to_dict()
    summary = {"trace": str(trace), "format": fmt} | summary
    if workload_out is not None and like is not None:
        with output.status(f"replaying {trace} through the prefix cache..."):
            _write_trace_workload(trace, chosen, block_tokens, workload_out, like, cache_capacity, eviction, tier)
        output.diagnostics().print(f"wrote {workload_out}", markup=False, highlight=False)
    if json_out:
        output.emit_json(summary)
    else:
        trace_tables.print_trace(output.results(), summary)


def _write_trace_workload(
    trace: Path,
    fmt: Any,
    block_tokens: int,
    path: Path,
    like: str,
    cache_capacity: str | None,
    eviction: str,
    tiers: list[str] | None = None,
) -> None:
    """`trace import --workload-out`: the trace's traffic with `like`'s model, SLA, prices and
    deployment, written atomically with a header saying where each part came from."""
    import yaml

    from pddplan.inputs import load_workload
    from pddplan.support.loading import write_atomic
    from pddplan.trace.workload import CacheChoice, workload_from_trace

    cache = CacheChoice(cache_capacity, eviction, tuple(tiers or ()))  # type: ignore[arg-type]
    built = workload_from_trace(trace, fmt, load_workload(like), cache, block_tokens, name=path.stem)
    summary = built.summary
    cv, peak = summary.get("interarrival_cv") or 1.0, summary.get("peak_to_mean_per_minute") or 1.0
    header = (
        f"# Written by `pddplan trace import {trace.name} --workload-out {path.name} --like {like}`.\n"
        f"# From the trace ({built.requests:,} requests with block hashes): arrival (mean rate,\n"
        f"# inter-arrival CV {cv:.2f}), prompt and output lengths, and request_mix, the joint (prompt, hit)\n"
        f"# distribution with hits replayed through a {built.capacity_text} {built.eviction.upper()} prefix cache.\n"
        f"# The trace's per-minute rate peaks at {peak:.2f}x its mean: arrivals follow that profile in\n"
        "# the simulation (and optimize's verification); the closed form sees the mean rate.\n"
        f"# From {like}: model, SLA, prices, deployment, serving.\n"
    )
    data = built.workload.model_dump(mode="json", exclude_none=True)
    write_atomic(path, header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))


def _tiered_cache(
    trace: Path,
    fmt: str,
    tiers: list[str],
    kv_per_token: float | None,
    block_tokens: int,
    model: str | None,
    json_out: bool,
) -> None:
    """`cache-curve --tier ...`: replay the trace through the tier chain."""
    from pddplan.errors import InputError
    from pddplan.report import output, trace_tables
    from pddplan.trace.read import read_trace
    from pddplan.trace.tiers import parse_tier, replay_tiers

    if kv_per_token is None:
        raise InputError("--tier needs --model: load times follow the model's KV bytes per token")
    parsed = [parse_tier(text, kv_per_token) for text in tiers]
    with output.status("replaying the trace through the tiers..."):
        result = replay_tiers(read_trace(trace, fmt), parsed, kv_per_token, block_tokens)  # type: ignore[arg-type]
    data: dict[str, Any] = {
        "trace": str(trace),
        "model": model,
        "eviction": "lru",
        "instances": 1,
        "routing": None,
        "points": [],
        "tiered": result.to_dict(),
    }
    if json_out:
        output.emit_json(data)
    else:
        trace_tables.print_tiers(output.results(), data)


@app.command("cache-plan")
def cache_plan(
    trace: Annotated[Path, typer.Argument(help="The trace file (with prompt block hashes).")],
    like: Annotated[str, typer.Option("--like", help="The workload whose model, SLA, prices and deployment apply.")],
    capacity: Annotated[
        str, typer.Option("--capacity", help="Cache capacities to price: bytes (0,100GB,1TB) or tokens (0,5M).")
    ],
    usd_per_gb_month: Annotated[
        float | None,
        typer.Option(
            "--usd-per-gb-month",
            help="What a GB of prefix cache costs you a month (DRAM, SSD or a KV store); default: the workload's "
            "deployment.prefix_cache.",
        ),
    ] = None,
    architecture: Annotated[
        list[str] | None, typer.Option("--architecture", "-a", help="Architecture (repeatable); default: all.")
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Cheapest plan for this rate instead of best BCR.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="mooncake (JSON lines) or csv (with hash_ids).")] = "mooncake",
    json_out: JsonFlag = False,
) -> None:
    """How much prefix cache to buy: the best deployment for the trace's traffic at each cache
    capacity, priced with the cache, and the marginal value of each step."""
    from pddplan.analyses.cache_plan import Traffic, best_point, cache_price, marginal_values
    from pddplan.analyses.cache_plan import cache_plan as run
    from pddplan.errors import InputError
    from pddplan.inputs import load_model, load_workload, workload_dir
    from pddplan.optimize.options import OptimizeOptions
    from pddplan.perf.kv import kv_bytes_per_token
    from pddplan.report import output, trace_tables
    from pddplan.support.limits import check_rate
    from pddplan.trace.curve import parse_capacities

    if fmt not in ("mooncake", "csv"):
        raise InputError(f"--format = {fmt!r}: expected mooncake or csv (hits need block hashes)")
    if rate is not None:
        check_rate(rate)
    template = load_workload(like)
    usd_per_gb_month = cache_price(template, usd_per_gb_month)
    capacities = parse_capacities(capacity, kv_bytes_per_token(load_model(template.model, template.kv_dtype)))
    options = OptimizeOptions(mode="rate", rate=rate) if rate is not None else OptimizeOptions()
    with output.status("pricing cache capacities...") as status:
        traffic = Traffic(trace, fmt, template, workload_dir(like))
        points = run(traffic, capacities, usd_per_gb_month, options, architecture, progress=status.update)
    best = best_point(points, options.mode)
    data = {
        "trace": str(trace),
        "workload": template.name,
        "usd_per_gb_month": usd_per_gb_month,
        "mode": options.mode,
        "points": [p.to_dict() | {"marginal_value": v} for p, v in zip(points, marginal_values(points), strict=True)],
        "best_capacity": best.capacity.text if best is not None else None,
    }
    if json_out:
        output.emit_json(data)
    else:
        trace_tables.print_cache_plan(output.results(), data)


@app.command("cache-curve")
def cache_curve(
    trace: Annotated[Path, typer.Argument(help="The trace file (with prompt block hashes).")],
    capacity: Annotated[
        str | None, typer.Option("--capacity", help="Capacities: bytes (1GB,10GB, with --model) or tokens (1M,10M).")
    ] = None,
    tier: Annotated[
        list[str] | None,
        typer.Option(
            "--tier",
            help="Instead of --capacity: a tier NAME:CAPACITY[:BANDWIDTH], fastest first (repeatable), e.g. "
            "--tier hbm:100GB --tier dram:1TB:50GB/s --tier ssd:20TB:6GB/s; reports each tier's hits and "
            "the load time (needs --model).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model whose KV bytes per token turn bytes into tokens.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="mooncake (JSON lines) or csv (with hash_ids).")] = "mooncake",
    block_tokens: Annotated[int, typer.Option("--block-tokens", help="Tokens per hashed block.")] = 512,
    eviction: Annotated[str, typer.Option("--eviction", help="lru or lfu.")] = "lru",
    instances: Annotated[
        int, typer.Option("--instances", help="Split the capacity into one cache per prefill instance.")
    ] = 1,
    routing: Annotated[str, typer.Option("--routing", help="With --instances: affinity or round-robin.")] = "affinity",
    html_path: Annotated[Path | None, typer.Option("--html", help="Also write the chart as an HTML page.")] = None,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Prefix hit rate against cache capacity, replaying the trace's block hashes (LRU or LFU; one
    pooled cache, or one per prefill instance), token- and request-weighted."""
    from pddplan.errors import InputError
    from pddplan.report import output, trace_tables
    from pddplan.support.limits import check_gpus_per_instance, check_tokens
    from pddplan.trace.curve import cache_curve as run
    from pddplan.trace.curve import parse_capacities

    choices = {"--format": (fmt, ("mooncake", "csv")), "--eviction": (eviction, ("lru", "lfu"))}
    choices["--routing"] = (routing, ("affinity", "round-robin"))
    for flag, (value, allowed) in choices.items():
        if value not in allowed:
            raise InputError(f"{flag} = {value!r}: expected one of {', '.join(allowed)}")
    check_tokens(block_tokens, "--block-tokens", 1)
    check_gpus_per_instance(instances, "--instances")
    kv_per_token = None
    if model is not None:
        from pddplan.inputs import load_model
        from pddplan.perf.kv import kv_bytes_per_token

        kv_per_token = kv_bytes_per_token(load_model(model))
    if (capacity is None) == (not tier):
        raise InputError("give --capacity (a hit-rate curve) or --tier (a tiered cache), not both or neither")
    if tier:
        _tiered_cache(trace, fmt, tier, kv_per_token, block_tokens, model, json_out)
        return
    assert capacity is not None
    capacities = parse_capacities(capacity, kv_per_token)
    if html_path is not None and html_path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--html = {str(html_path)!r}: name the page .html")
    _check_image_outputs(png, svg)
    with output.status("replaying the trace..."):
        results = run(trace, fmt, capacities, block_tokens, eviction, instances, routing)  # type: ignore[arg-type]
    data = trace_tables.curve_data(str(trace), capacities, results, eviction, instances, routing, model)
    _write_charts([trace_tables.curve_chart(data)], f"prefix cache: {trace.name}", [], png, svg, html_path)
    for path in (html_path, png, svg):
        if path is not None:
            output.diagnostics().print(f"wrote {path}", markup=False, highlight=False)
    if json_out:
        output.emit_json(data)
    else:
        trace_tables.print_curve(output.results(), data)
