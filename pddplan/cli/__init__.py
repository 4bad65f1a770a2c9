"""The `pddplan` command line: parse options, call the library, render the result.

Nothing here computes: every command is a call into the library (see the import inside each
command, kept local so `pddplan --help` starts instantly). Exit codes: 0 ok, 1 gate failed,
2 bad input, 3 infeasible.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from typer.core import TyperGroup

from pddplan.support.blas import single_threaded_blas

single_threaded_blas()  # before any command imports numpy: see pddplan/support/blas.py

if TYPE_CHECKING:
    from pddplan.optimize.options import RelayPlacement


class _Group(TyperGroup):
    """Turns every pddplan error, usage error and failed write to stdout into one line on stderr
    and its exit code, never a traceback."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # the command line as given, so that a usage error can quote the value it refused
        ctx.meta.setdefault(_ARGS_KEY, list(args))
        with _one_line_usage_errors():
            return list(super().parse_args(ctx, args))

    def invoke(self, ctx: Any) -> Any:
        from pddplan.errors import PddplanError

        try:
            with _one_line_usage_errors():
                result = super().invoke(ctx)
                sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
                return result
        except PddplanError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # the reader went away (`pddplan ... | head`): stop quietly, as other CLI tools do
            _silence_stdout()
            raise typer.Exit(141) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
                raise
            _silence_stdout()
            where = exc.filename or "standard output"
            typer.echo(f"error: {where}: cannot write: {exc.strerror}", err=True)
            raise typer.Exit(2) from None


@contextlib.contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """A usage error (unknown option, missing argument, a value of the wrong type) as one line:
    `error: MESSAGE (see COMMAND --help)`, exit 2. A bare command still shows its help."""
    # typer >= 0.26 (the floor in pyproject.toml) vendors click as typer._click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "pddplan"
        message = " ".join(exc.format_message().split())
        given = _value_given(exc)
        if given is not None and given not in message:
            message += f" (got {given!r})"  # newer typer versions leave the value out
        typer.echo(f"error: {message} (see {command} --help)", err=True)
        raise typer.Exit(2) from None


_ARGS_KEY = "pddplan.args"


def _value_given(exc: Any) -> str | None:
    """The text the user gave for the option a usage error refused (`--rate abc` or
    `--rate=abc`), when the error is about one option's value."""
    param, ctx = getattr(exc, "param", None), exc.ctx
    if param is None or ctx is None:
        return None
    args: list[str] = ctx.meta.get(_ARGS_KEY, [])
    for option in getattr(param, "opts", []):
        for index, arg in enumerate(args):
            if arg == option and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(option + "="):
                return arg[len(option) + 1 :]
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _app(help_text: str, completion: bool = False) -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=help_text,
        no_args_is_help=True,
        add_completion=completion,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


# shell completion on the root command only: `pddplan --install-completion` / `--show-completion`
app = _app("Plan and price cross-datacenter PDD (prefill / relay-decode / main-decode) LLM serving.", completion=True)


def _print_version(value: bool) -> None:
    if value:
        from pddplan import __version__

        typer.echo(f"pddplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version and exit."),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress or notices on stderr (errors still show)."),
    ] = False,
) -> None:
    """Plan and price cross-datacenter PDD (prefill / relay-decode / main-decode) LLM serving."""
    from pddplan.report import output

    output.set_quiet(quiet)


hardware_app = _app("Browse the built-in hardware profiles.")
models_app = _app("Browse the built-in model catalog, or inspect a config.json.")
workloads_app = _app("Browse the shipped workloads, or check a workload file.")
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(workloads_app, name="workloads")
trace_app = _app("Read request traces (Mooncake JSON lines, CSV, the Azure LLM trace).")
app.add_typer(trace_app, name="trace")

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


# -- browsing -------------------------------------------------------------------------------------
@hardware_app.command("list")
def hardware_list(json_out: JsonFlag = False) -> None:
    """List the built-in GPU profiles with their four dimensions and price."""
    from pddplan.inputs import load_hardware_catalog
    from pddplan.inputs.browse import hardware_summary
    from pddplan.report import browse_tables, output

    rows = [hardware_summary(p) for p in load_hardware_catalog().values()]
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.hardware_table(rows))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Profile name or YAML file.")], json_out: JsonFlag = False
) -> None:
    """Show one GPU profile, every figure with its source."""
    from pddplan.inputs import load_hardware
    from pddplan.inputs.browse import hardware_summary
    from pddplan.report import browse_tables, output

    summary = hardware_summary(load_hardware(name))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_hardware(output.results(), summary)


KvDtypeOption = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype: bf16 or fp8.")]


def _kv_dtype(value: str | None) -> Any:
    from pddplan.errors import InputError

    if value not in (None, "bf16", "fp8"):
        raise InputError(f"--kv-dtype = {value!r}: expected bf16 or fp8")
    return value


@models_app.command("list")
def models_list(kv_dtype: KvDtypeOption = None, json_out: JsonFlag = False) -> None:
    """List the model catalog with parameter counts and KV bytes per token."""
    from pddplan.inputs import load_model, model_index
    from pddplan.inputs.browse import model_summary
    from pddplan.report import browse_tables, output

    rows = [model_summary(load_model(name, _kv_dtype(kv_dtype))) for name in model_index()]
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.models_table(rows))


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Catalog name, config.json path, or model YAML.")],
    kv_dtype: KvDtypeOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Show a model's parameters, weights and KV bytes per token, with each figure's formula."""
    from pddplan.inputs import load_model
    from pddplan.inputs.browse import model_summary
    from pddplan.report import browse_tables, output

    summary = model_summary(load_model(name, _kv_dtype(kv_dtype)))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_model(output.results(), summary)


@app.command("architectures")
def architectures_list(json_out: JsonFlag = False) -> None:
    """List the architectures pddplan plans (each a module in pddplan/architectures)."""
    from pddplan.architectures import describe
    from pddplan.report import browse_tables, output

    rows = describe()
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.architectures_table(rows))


@workloads_app.command("list")
def workloads_list(json_out: JsonFlag = False) -> None:
    """List the shipped workloads."""
    from pddplan.inputs import load_workload
    from pddplan.inputs.browse import workload_summary
    from pddplan.report import browse_tables, output
    from pddplan.support.catalog import entries

    rows = [workload_summary(load_workload(name)) for name in entries("workloads")]
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.workloads_table(rows))


@workloads_app.command("show")
def workloads_show(
    name: Annotated[str, typer.Argument(help="Shipped workload name or YAML file.")], json_out: JsonFlag = False
) -> None:
    """Show (and validate) one workload."""
    from pddplan.inputs import load_workload
    from pddplan.inputs.browse import workload_summary
    from pddplan.report import browse_tables, output

    summary = workload_summary(load_workload(name))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_workload(output.results(), summary)


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


def _architecture_names(given: list[str] | None) -> list[str]:
    """The --architecture values, checked against the registry (default: every architecture)."""
    from pddplan import architectures
    from pddplan.errors import InputError

    for name in given or []:
        if name not in architectures.names():
            raise InputError(f"--architecture = {name!r}: expected one of {', '.join(architectures.names())}")
    return list(given) if given else list(architectures.names())


@app.command("schema")
def schema(
    out: Annotated[Path | None, typer.Option("--out", help="Write one <kind>.schema.json per input kind here.")] = None,
    kind: Annotated[
        str | None, typer.Argument(help="One kind to print: hardware, model, workload, plan, baseline.")
    ] = None,
    markdown_path: Annotated[
        Path | None, typer.Option("--markdown", help="Write a Markdown reference of every field and default.")
    ] = None,
    outputs: Annotated[
        Path | None,
        typer.Option("--outputs", help="Write one <command>.output.schema.json per command's --json output here."),
    ] = None,
) -> None:
    """Write the JSON Schemas of every input file kind (for editors and CI), and of every command's
    --json output (`--outputs DIR`)."""
    from pddplan.report import output
    from pddplan.report.schemas import markdown_reference, schema_for, write_output_schemas, write_schemas
    from pddplan.support.loading import write_atomic

    if outputs is not None:
        for path in write_output_schemas(outputs):
            output.diagnostics().print(f"wrote {path}", markup=False, highlight=False)
        if out is None and markdown_path is None:
            return
    if markdown_path is not None:
        write_atomic(markdown_path, markdown_reference())
        output.diagnostics().print(f"wrote {markdown_path}", markup=False, highlight=False)
    if out is not None:
        for path in write_schemas(out):
            output.diagnostics().print(f"wrote {path}", markup=False, highlight=False)
    elif markdown_path is None:
        output.emit_json(schema_for(kind or "workload"))


# -- performance core ---------------------------------------------------------------------------
@app.command("estimate")
def estimate(
    model: Annotated[str, typer.Option("--model", help="Catalog model, config.json or model YAML.")],
    gpu: Annotated[str, typer.Option("--gpu", help="Hardware profile name or YAML file.")],
    tp: Annotated[int, typer.Option("--tp", help="GPUs per instance (tensor/expert parallel degree).")] = 1,
    prefill: Annotated[int | None, typer.Option("--prefill", help="Prefill this many new tokens.")] = None,
    cached: Annotated[int, typer.Option("--cached", help="...on top of this many cached tokens.")] = 0,
    chunk: Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill token budget.")] = None,
    decode_batch: Annotated[int | None, typer.Option("--decode-batch", help="One decode step of B sequences.")] = None,
    extend: Annotated[int | None, typer.Option("--extend", help="Recompute K tokens in one extend step.")] = None,
    context: Annotated[int | None, typer.Option("--context", help="Context tokens for decode/extend.")] = None,
    kv_dtype: KvDtypeOption = None,
    ep: Annotated[
        bool | None,
        typer.Option(
            "--ep/--no-ep",
            help="Expert parallelism with data-parallel attention (--ep) or tensor parallelism throughout "
            "(--no-ep); default: EP when the instance spans more than one scale-up domain.",
        ),
    ] = None,
    tp_attention: Annotated[
        bool,
        typer.Option(
            "--tp-attention",
            help="Experts expert-parallel under tensor-parallel attention (implies --ep; SGLang --tp N --ep N, "
            "vLLM --enable-expert-parallel without data parallelism).",
        ),
    ] = False,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="Use the GPU's factors calibrated for this serving stack (e.g. sglang-0.5)."),
    ] = None,
    mtp: Annotated[int, typer.Option("--mtp", help="Decode with multi-token prediction: K draft tokens per step.")] = 0,
    accept: Annotated[
        float | None, typer.Option("--accept", help="With --mtp: share of draft tokens accepted (0-1].")
    ] = None,
    cuda_graph_max_batch: Annotated[
        int | None,
        typer.Option(
            "--cuda-graph-max-batch",
            help="Largest decode batch the engine runs as a CUDA graph (SGLang --cuda-graph-max-bs-decode); "
            "larger ones launch eagerly, 0: none is captured. Default: every decode batch is captured.",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Predict one prefill, decode step or extend step, with its breakdown and binding resource."""
    from pddplan.calibration.estimate import StepQuery
    from pddplan.calibration.estimate import estimate as run
    from pddplan.report import output, perf_tables

    query = StepQuery(
        prefill_tokens=prefill,
        cached_tokens=cached,
        chunk_tokens=chunk,
        decode_batch=decode_batch,
        extend_tokens=extend,
        context_tokens=context,
        mtp_draft_tokens=mtp,
        mtp_acceptance=accept,
        cuda_graph_max_batch=cuda_graph_max_batch,
    )
    result = run(
        model,
        gpu,
        tp,
        query,
        kv_dtype=_kv_dtype(kv_dtype),
        expert_parallel=_layout_flag(ep, tp_attention),
        stack=stack,
    )
    if json_out:
        output.emit_json(result)
    else:
        perf_tables.print_estimate(output.results(), result)


def _layout_flag(ep: bool | None, tp_attention: bool) -> bool | Literal["tp-attention"] | None:
    """--ep/--no-ep and --tp-attention as `estimate`'s expert_parallel value."""
    from pddplan.errors import InputError

    if not tp_attention:
        return ep
    if ep is False:
        raise InputError("--tp-attention with --no-ep: tensor-parallel attention is a layout of expert parallelism")
    return "tp-attention"


@app.command("calibrate")
def calibrate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="CSV of measured step times: columns model, gpu, tp, kind (prefill, decode or extend), tokens, "
            "cached, batch, context, measured_s; optional weight_dtype, kv_dtype, split (fit, holdout, excluded), "
            "stack, expert_parallel (tests/data/measurements.md describes each). With --from: benchmark result files.",
            show_default=False,
        ),
    ],
    from_bench: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Read benchmark results instead: sglang-bench (sglang.bench_serving --output-file) or vllm-bench "
            "(vllm bench serve --save-result); with --gpu.",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="With --from: the model the runs served (default: from the file).")
    ] = None,
    tp: Annotated[
        int | None, typer.Option("--tp", help="With --from: GPUs per instance (default: from the file).")
    ] = None,
    decode_instances: Annotated[
        int, typer.Option("--decode-instances", help="With --from: decode servers behind the benchmark's endpoint.")
    ] = 1,
    rows_out: Annotated[
        Path | None, typer.Option("--rows-out", help="With --from: also write the rows made, as a measurements CSV.")
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Fit this GPU's factors to its rows.")] = None,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="With --gpu: fit only the rows of this serving stack (the CSV's stack column)."),
    ] = None,
    all_gpus: Annotated[bool, typer.Option("--all", help="Fit one set of default factors to every row.")] = False,
    output_path: Annotated[Path | None, typer.Option("--output", help="Write the calibrated profile here.")] = None,
    write_catalog: Annotated[
        bool,
        typer.Option(
            "--write-catalog",
            help="With --all: refit the defaults, every GPU and every (GPU, stack) and write them into the catalog.",
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Fit efficiency factors to measured step times; report the error before and after."""
    from pddplan.calibration import calibrate as cal
    from pddplan.report import output, perf_tables

    _check_calibrate_options(files, gpu, all_gpus, stack, write_catalog, from_bench, (model, tp, rows_out))
    from_summary = None
    if gpu is not None:
        if from_bench is not None:
            from pddplan.calibration import bench_import

            fit = bench_import.calibrate_from_bench(files, from_bench, gpu, model, tp, stack, decode_instances)  # type: ignore[arg-type]
            for note in fit.notes:
                output.diagnostics().print(f"note: {note}", markup=False, highlight=False)
            if rows_out is not None:
                from pddplan.support.loading import write_atomic

                write_atomic(rows_out, bench_import.rows_csv(fit.rows))
            profile, result, stack, from_summary = fit.profile, fit.result, fit.stack, fit.summary()
        else:
            profile, result = cal.calibrate_profile(files[0], gpu, stack=stack)
        if output_path is not None:
            _write_calibrated_profile(output_path, gpu, profile, result, stack)
    else:
        result = cal.fit_all(files[0])
        if write_catalog:
            from pddplan.calibration.refit import refit_file
            from pddplan.calibration.refit import write_catalog as write

            with output.status("refitting the catalog...") as status:
                refit = refit_file(files[0], progress=lambda text: status.update(text))
            for path in write(refit):
                output.diagnostics().print(f"wrote {path}")
        if output_path is not None:
            from pddplan.support.loading import write_atomic

            write_atomic(output_path, cal.efficiency_yaml(result.efficiency))
    label = "all GPUs" if gpu is None else (gpu if stack is None else f"{gpu} / {stack}")
    summary = perf_tables.calibration_summary(result, label, output_path)
    if from_summary is not None:
        summary["from_bench"] = from_summary
    for item in summary["factors_on_bounds"]:
        output.diagnostics().print(
            f"warning: {item['factor']} = {item['value']:.4g} sits on its {item['bound']} bound: the step "
            "model's structure, not the data, limits this fit (see docs/model.md)",
            markup=False,
            highlight=False,
        )
    if json_out:
        output.emit_json(summary)
    else:
        perf_tables.print_calibration(output.results(), summary)
    if output_path is not None:
        output.diagnostics().print(f"wrote {output_path}")


def _check_calibrate_options(
    files: list[Path],
    gpu: str | None,
    all_gpus: bool,
    stack: str | None,
    write_catalog: bool,
    from_bench: str | None,
    bench_only: tuple[object, object, object],
) -> None:
    """InputError for a combination of calibrate's options that means nothing."""
    from pddplan.errors import InputError

    if (gpu is None) == (not all_gpus):
        raise InputError("give --gpu NAME to calibrate one profile, or --all for the shipped defaults")
    if from_bench is None:
        for flag, value in zip(("--model", "--tp", "--rows-out"), bench_only, strict=True):
            if value is not None:
                raise InputError(f"{flag} goes with --from (benchmark results)")
        if len(files) != 1:
            raise InputError(f"give one measurements CSV (got {len(files)} files); several files go with --from")
    elif gpu is None:
        raise InputError("--from needs --gpu NAME: benchmark files do not say which GPU ran them")
    if stack is not None and gpu is None:
        raise InputError("--stack needs --gpu NAME: stack factors belong to one GPU's profile")
    if write_catalog and not all_gpus:
        raise InputError("--write-catalog goes with --all (it refits every shipped factor)")
    if write_catalog:
        from pddplan.support.catalog import is_installed_copy

        if is_installed_copy():
            raise InputError(
                "--write-catalog rewrites a source checkout's hardware_profiles/ and default factors; this pddplan "
                "is an installed package (its files are pip's): write your own profile with --gpu G --output FILE"
            )


def _write_calibrated_profile(output_path: Path, gpu: str, profile: Any, result: Any, stack: str | None) -> None:
    """Write the calibrated profile: `output_path`'s own text (or the catalog GPU's) with its
    efficiency block, or with `stack`'s factors added to those it already holds."""
    from pddplan.calibration import calibrate as cal
    from pddplan.inputs import load_hardware
    from pddplan.support.loading import write_atomic

    source_path = output_path if output_path.exists() else None
    text = source_path.read_text() if source_path else _profile_text(gpu)
    if stack is None:
        write_atomic(output_path, cal.with_efficiency_block(text, result.efficiency))
    else:
        kept = load_hardware(str(source_path)).stack_efficiency if source_path else profile.stack_efficiency
        stacks = {**kept, stack: result.efficiency}
        write_atomic(output_path, cal.with_efficiency_block(text, None, stacks))


def _profile_text(gpu: str) -> str:
    from pddplan.support import catalog

    return catalog.resolve("hardware_profiles", gpu, "GPU").read_text(encoding="utf-8")


@app.command("accuracy")
def accuracy(
    measurements: Annotated[
        Path | None, typer.Argument(help="Measured step times; default: the shipped public set.")
    ] = None,
    folds: Annotated[
        int,
        typer.Option(
            "--folds",
            help="Also K-fold cross-validate the whole refit on the fit rows (K refits, about 15 s each).",
        ),
    ] = 0,
    json_out: JsonFlag = False,
) -> None:
    """Error of the shipped step-time model against measured points, held-out rows apart."""
    from pddplan.calibration.accuracy import accuracy_report, cross_validation
    from pddplan.calibration.calibrate import read_measurements
    from pddplan.report import output, perf_tables

    report = accuracy_report(measurements)
    if folds:
        with output.status("cross-validating...") as status:
            rows = read_measurements(Path(report["measurements"]))
            report["cross_validation"] = cross_validation(rows, folds, progress=lambda text: status.update(text))
    if json_out:
        output.emit_json(report)
    else:
        perf_tables.print_accuracy(output.results(), report)


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


def _relay_placement(value: str) -> RelayPlacement:
    """The --relay flag's value, checked."""
    from pddplan.errors import InputError
    from pddplan.optimize.options import RELAY_PLACEMENTS

    for placement in RELAY_PLACEMENTS:
        if value == placement:
            return placement
    raise InputError(f"--relay = {value!r}: expected one of {', '.join(RELAY_PLACEMENTS)}")


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


@app.command("bathtub")
def bathtub(
    workload: Annotated[str, typer.Argument(help="Workload name or YAML file.")] = "pdd-agent-64k",
    mode: Annotated[
        str, typer.Option("--mode", help="fixed: every request at the hit rate; shift: move the whole distribution.")
    ] = "fixed",
    points: Annotated[int, typer.Option("--points", help="Hit rates from 0 to 100%.")] = 101,
    chunk: Annotated[
        int | None, typer.Option("--chunk", help="Chunked-prefill size (default: the workload's).")
    ] = None,
    fixed_plan: Annotated[
        bool,
        typer.Option(
            "--fixed-plan/--resize",
            help="Keep each plan as sized at the workload's own hit rate, only the hit rate moves (default); "
            "or re-size it at every hit rate.",
        ),
    ] = True,
    architecture: ArchitectureOption = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="A request trace (Mooncake JSON lines): mark the hit its traffic reaches at each cache size, "
            "and the cache that climbs out of a valley.",
        ),
    ] = None,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")] = None,
    jobs: JobsOption = 1,
    backend: BackendOption = "loky",
    scheduler: SchedulerOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Benefit against prefix-hit rate per architecture (the bathtub), with its valley, tail-chunk
    dips, crossovers and what it takes to climb out."""
    from pddplan.analyses import bathtub as tub
    from pddplan.errors import InputError
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.report import bathtub_report, output
    from pddplan.report.charts import terminal
    from pddplan.support.distribute import Execution
    from pddplan.support.loading import write_atomic

    if mode not in ("fixed", "shift"):
        raise InputError(f"--mode = {mode!r}: expected fixed or shift")
    from pddplan.support.limits import check_points

    check_points(points)  # before the progress bar starts
    _check_image_outputs(png, svg)
    names = _architecture_names(architecture)
    spec = load_workload(workload)
    console = output.results()

    with output.progress_bar() as progress:
        task = progress.add_task("hit-rate sweep", total=points)
        options = tub.BathtubOptions(
            mode,  # type: ignore[arg-type]
            points,
            chunk,
            fixed_plan,
            Execution(jobs, backend, False, scheduler),
        )
        result = tub.bathtub(
            spec,
            workload_dir(workload),
            names,
            options,
            progress=lambda done, total: progress.update(task, completed=done),
        )
    charts = bathtub_report.charts(result)
    notes = bathtub_report.findings_text(result)
    marks = None
    if trace is not None:
        from pddplan.inputs import load_model
        from pddplan.perf.kv import kv_bytes_per_token
        from pddplan.trace.bathtub_marks import marks_text, trace_marks

        with output.status(f"replaying {trace} at each cache size..."):
            kv = kv_bytes_per_token(load_model(spec.model, spec.kv_dtype))
            marks = trace_marks(result.findings, trace, "mooncake", kv)
        notes += marks_text(marks, spec.hit_rate.mean())
    _write_charts(charts, f"pddplan bathtub: {spec.name}", notes, png, svg, html)
    if csv_path is not None:
        write_atomic(csv_path, bathtub_report.csv_text(result))
    if json_out:
        output.emit_json(result.to_dict() | ({"trace": marks} if marks is not None else {}))
        return
    for chart in charts:
        console.print(terminal(chart), markup=False)
        console.print()
    for note in notes:
        console.print(f"- {note}", markup=False)


@app.command("sweep")
def sweep(
    workload: Annotated[str, typer.Argument(help="Workload name or YAML file.")],
    param: Annotated[str, typer.Option("--param", help="Field path, e.g. deployment.wan_lines[0].capacity_gbps.")],
    values: Annotated[str | None, typer.Option("--values", help="Comma-separated values.")] = None,
    span: Annotated[str | None, typer.Option("--range", help="START:STOP:NUM evenly spaced values.")] = None,
    architecture: ArchitectureOption = None,
    jobs: JobsOption = 1,
    backend: BackendOption = "loky",
    scheduler: SchedulerOption = None,
    exact: Annotated[
        bool,
        typer.Option(
            "--optimize",
            help="Run the integer program at each point (slower); figures are then the plan's goodput "
            "at the offered rate, not its fluid capacity.",
        ),
    ] = False,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart as PNG (needs pddplan[plot]).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write the chart as SVG (needs pddplan[plot]).")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Cost, BCR and GPUs of each architecture as one numeric input of the workload varies."""

    from pddplan.analyses import sweep as sweeping
    from pddplan.report import output, sweep_report
    from pddplan.report.charts import terminal
    from pddplan.support import catalog
    from pddplan.support.distribute import Execution
    from pddplan.support.limits import check_jobs
    from pddplan.support.loading import write_atomic

    names = _architecture_names(architecture)
    check_jobs(jobs)
    _check_image_outputs(png, svg)
    points_values = sweeping.parse_values(values, span)
    path = catalog.resolve("workloads", workload, "workload")
    console = output.results()
    with output.progress_bar() as progress:
        task = progress.add_task(f"sweeping {param}", total=len(points_values))
        points = sweeping.sweep(
            path,
            param,
            points_values,
            names,
            Execution(jobs, backend, exact, scheduler),
            progress=lambda done, total: progress.update(task, completed=done),
        )
    chart = sweep_report.chart(param, points, names)
    _write_charts([chart], f"pddplan sweep {param}", sweep_report.notes(param, points, names), png, svg, html)
    if csv_path is not None:
        write_atomic(csv_path, sweep_report.csv_text(points, names))
    if json_out:
        output.emit_json({"workload": workload, "param": param, "architectures": names, "points": points})
        return
    console.print(sweep_report.table(param, points, names))
    console.print(terminal(chart), markup=False)


@app.command("paper")
def paper(
    requests: Annotated[int, typer.Option("--requests", help="Requests simulated per plan.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulations.")] = 0,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """The PDD article's figures next to pddplan's for its scenario, with why each differs."""
    from rich.table import Table

    from pddplan.analyses import paper as comparison
    from pddplan.errors import InputError
    from pddplan.report import output

    if requests < 1000:
        raise InputError(f"--requests = {requests}: use at least 1000 for stable tails")
    console = output.results()
    with output.status("running the paper scenario...") as status:
        result = comparison.compare(requests, seed, progress=lambda text: status.update(text))
    if markdown_path is not None:
        from pddplan.report.paper_report import write_markdown

        write_markdown(markdown_path, result)
    if json_out:
        output.emit_json(result)
        return
    table = Table(title="PDD article vs pddplan (pdd-agent-64k)", show_lines=True)
    for header in ("figure", "article", "pddplan", "why they differ"):
        table.add_column(header)
    for row in result["rows"]:
        table.add_row(row["metric"], row["article"], row["pddplan"], row["why"])
    console.print(table)
    from pddplan.optimize.robustness import RobustnessReport
    from pddplan.report import robustness_report

    robustness_report.print_report(console, RobustnessReport.from_dict(result["robustness"]))


@app.command("agreement")
def agreement(
    requests: Annotated[int, typer.Option("--requests", help="Requests simulated per plan.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulations.")] = 0,
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Where the closed-form evaluator and the simulation disagree on the shipped workloads."""
    from rich.table import Table

    from pddplan.analyses import agreement as check
    from pddplan.report import output
    from pddplan.support.loading import write_atomic

    console = output.results()
    with output.status("comparing...") as status:
        rows = check.agreement(requests, seed, progress=lambda text: status.update(text))
    if markdown_path is not None:
        from pddplan.report.agreement_report import markdown as agreement_markdown

        write_atomic(markdown_path, agreement_markdown(rows, requests))
    if json_out:
        output.emit_json(rows)
        return
    table = Table(title="evaluate vs simulate")
    for header in ("workload", "architecture", "figure", "evaluate", "simulate", "gap"):
        table.add_column(header, justify="right" if header in ("evaluate", "simulate", "gap") else "left")
    for r in rows:
        table.add_row(
            r["workload"],
            r["architecture"],
            r["figure"],
            f"{r['evaluate']:.4g}",
            f"{r['simulate']:.4g}",
            f"{r['relative_gap']:+.1%}",
        )
    console.print(table)


def main() -> None:
    """Console-script entry point. SIGTERM exits through Python's unwinding (exit 143), so an
    interrupted write removes its temporary file as it does on Ctrl-C."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    app()
