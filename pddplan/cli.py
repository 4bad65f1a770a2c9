"""The `pddplan` command line: parse options, call the library, render the result.

Nothing here computes: every command is a call into the library (see the import inside each
command, kept local so `pddplan --help` starts instantly). Exit codes: 0 ok, 1 gate failed,
2 bad input, 3 infeasible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup


class _Group(TyperGroup):
    """Turns every pddplan error into one line on stderr and its exit code, never a traceback."""

    def invoke(self, ctx: Any) -> Any:
        from pddplan.errors import PddplanError

        try:
            return super().invoke(ctx)
        except PddplanError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None


def _app(help_text: str) -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


app = _app("Plan and price cross-datacenter PDD (prefill / relay-decode / main-decode) LLM serving.")
hardware_app = _app("Browse the built-in hardware profiles.")
models_app = _app("Browse the built-in model catalog, or inspect a config.json.")
workloads_app = _app("Browse the shipped workloads, or check a workload file.")
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(workloads_app, name="workloads")

JsonFlag = Annotated[bool, typer.Option("--json", help="Write machine-readable JSON to stdout, nothing else.")]


# -- browsing -------------------------------------------------------------------------------------
@hardware_app.command("list")
def hardware_list(json_out: JsonFlag = False) -> None:
    """List the built-in GPU profiles with their four dimensions and price."""
    from pddplan.browse import hardware_summary
    from pddplan.inputs import load_hardware_catalog
    from pddplan.report import browse_tables, output

    rows = [hardware_summary(p) for p in load_hardware_catalog().values()]
    if json_out:
        output.emit_json(rows)
    else:
        output.human().print(browse_tables.hardware_table(rows))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Profile name or YAML file.")], json_out: JsonFlag = False
) -> None:
    """Show one GPU profile, every figure with its source."""
    from pddplan.browse import hardware_summary
    from pddplan.inputs import load_hardware
    from pddplan.report import browse_tables, output

    summary = hardware_summary(load_hardware(name))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_hardware(output.human(), summary)


KvDtypeOption = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype: bf16 or fp8.")]


def _kv_dtype(value: str | None) -> Any:
    from pddplan.errors import InputError

    if value not in (None, "bf16", "fp8"):
        raise InputError(f"--kv-dtype = {value!r}: expected bf16 or fp8")
    return value


@models_app.command("list")
def models_list(kv_dtype: KvDtypeOption = None, json_out: JsonFlag = False) -> None:
    """List the model catalog with parameter counts and KV bytes per token."""
    from pddplan.browse import model_summary
    from pddplan.inputs import load_model, model_index
    from pddplan.report import browse_tables, output

    rows = [model_summary(load_model(name, _kv_dtype(kv_dtype))) for name in model_index()]
    if json_out:
        output.emit_json(rows)
    else:
        output.human().print(browse_tables.models_table(rows))


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Catalog name, config.json path, or model YAML.")],
    kv_dtype: KvDtypeOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Show a model's parameters, weights and KV bytes per token, with each figure's formula."""
    from pddplan.browse import model_summary
    from pddplan.inputs import load_model
    from pddplan.report import browse_tables, output

    summary = model_summary(load_model(name, _kv_dtype(kv_dtype)))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_model(output.human(), summary)


@workloads_app.command("list")
def workloads_list(json_out: JsonFlag = False) -> None:
    """List the shipped workloads."""
    from pddplan.browse import workload_summary
    from pddplan.catalog import entries
    from pddplan.inputs import load_workload
    from pddplan.report import browse_tables, output

    rows = [workload_summary(load_workload(name)) for name in entries("workloads")]
    if json_out:
        output.emit_json(rows)
    else:
        output.human().print(browse_tables.workloads_table(rows))


@workloads_app.command("show")
def workloads_show(
    name: Annotated[str, typer.Argument(help="Shipped workload name or YAML file.")], json_out: JsonFlag = False
) -> None:
    """Show (and validate) one workload."""
    from pddplan.browse import workload_summary
    from pddplan.inputs import load_workload
    from pddplan.report import browse_tables, output

    summary = workload_summary(load_workload(name))
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_workload(output.human(), summary)


@app.command("schema")
def schema(
    out: Annotated[Path | None, typer.Option("--out", help="Write one <kind>.schema.json per input kind here.")] = None,
    kind: Annotated[
        str | None, typer.Argument(help="One kind to print: hardware, model, workload, plan, baseline.")
    ] = None,
) -> None:
    """Write the JSON Schemas of every input file kind (for editors and CI)."""
    from pddplan.report import output
    from pddplan.schemas import schema_for, write_schemas

    if out is not None:
        for path in write_schemas(out):
            typer.echo(f"wrote {path}", err=True)
    else:
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
    ep: Annotated[bool | None, typer.Option("--ep/--no-ep", help="Force expert parallelism on or off.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Predict one prefill, decode step or extend step, with its breakdown and binding resource."""
    from pddplan.perf.estimate import estimate as run
    from pddplan.report import output, perf_tables

    result = run(
        model,
        gpu,
        tp,
        prefill_tokens=prefill,
        cached_tokens=cached,
        chunk_tokens=chunk,
        decode_batch=decode_batch,
        extend_tokens=extend,
        context_tokens=context,
        kv_dtype=_kv_dtype(kv_dtype),
        expert_parallel=ep,
    )
    if json_out:
        output.emit_json(result)
    else:
        perf_tables.print_estimate(output.human(), result)


@app.command("calibrate")
def calibrate(
    measurements: Annotated[Path, typer.Argument(help="CSV of measured step times (see docs/model.md).")],
    gpu: Annotated[str | None, typer.Option("--gpu", help="Fit this GPU's factors to its rows.")] = None,
    all_gpus: Annotated[bool, typer.Option("--all", help="Fit one set of default factors to every row.")] = False,
    output_path: Annotated[Path | None, typer.Option("--output", help="Write the calibrated profile here.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Fit efficiency factors to measured step times; report the error before and after."""
    from pddplan.errors import InputError
    from pddplan.perf import calibrate as cal
    from pddplan.report import output, perf_tables

    if (gpu is None) == (not all_gpus):
        raise InputError("give --gpu NAME to calibrate one profile, or --all for the shipped defaults")
    if gpu is not None:
        profile, result = cal.calibrate_profile(measurements, gpu)
        if output_path is not None:
            source_path = output_path if output_path.exists() else None
            text = source_path.read_text() if source_path else _profile_text(gpu)
            from pddplan.loading import write_atomic

            write_atomic(output_path, cal.with_efficiency_block(text, result.efficiency))
    else:
        result = cal.fit_all(measurements)
        if output_path is not None:
            from pddplan.loading import write_atomic

            write_atomic(output_path, cal.efficiency_yaml(result.efficiency))
    summary = perf_tables.calibration_summary(result, gpu or "all GPUs", output_path)
    if json_out:
        output.emit_json(summary)
    else:
        perf_tables.print_calibration(output.human(), summary)


def _profile_text(gpu: str) -> str:
    from pddplan import catalog

    return catalog.resolve("hardware_profiles", gpu, "GPU").read_text(encoding="utf-8")


@app.command("accuracy")
def accuracy(
    measurements: Annotated[
        Path | None, typer.Argument(help="Measured step times; default: the shipped public set.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Error of the shipped step-time model against measured points, held-out rows apart."""
    from pddplan.perf.accuracy import accuracy_report
    from pddplan.report import output, perf_tables

    report = accuracy_report(measurements)
    if json_out:
        output.emit_json(report)
    else:
        perf_tables.print_accuracy(output.human(), report)


def main() -> None:
    """Console-script entry point."""
    app()
