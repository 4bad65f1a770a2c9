"""`pddplan hardware|models|workloads|architectures|schema`: browse the catalogs and write the schemas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app, hardware_app, models_app, workloads_app
from pddplan.cli.options import JsonFlag, KvDtypeOption, _kv_dtype

if TYPE_CHECKING:
    pass


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
