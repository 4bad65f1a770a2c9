"""`pddplan hardware|models|workloads|architectures|schema`: browse the catalogs and write the schemas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app, hardware_app, models_app, workloads_app
from pddplan.cli.options import DetailFlag, JsonFlag, KvDtypeOption

if TYPE_CHECKING:
    pass


# -- browsing -------------------------------------------------------------------------------------
HardwareNameArg = Annotated[str, typer.Argument(help="Profile name or YAML file.")]
ModelNameArg = Annotated[str, typer.Argument(help="Catalog name, config.json path, or model YAML.")]
WorkloadNameArg = Annotated[str, typer.Argument(help="Shipped workload name or YAML file.")]


@hardware_app.command("list")
def hardware_list(detail: DetailFlag = False, json_out: JsonFlag = False) -> None:
    """List the built-in GPU profiles with their four dimensions and price."""
    from pddplan.inputs.browse import hardware_rows
    from pddplan.report import browse_tables, output

    rows = hardware_rows()
    if json_out:
        output.emit_json(rows)
    else:
        browse_tables.print_hardware_list(output.results(), [r.json_data() for r in rows], detail)


@hardware_app.command("show")
def hardware_show(name: HardwareNameArg, json_out: JsonFlag = False) -> None:
    """Show one GPU profile, every figure with its source."""
    from pddplan.inputs.browse import hardware_details
    from pddplan.report import browse_tables, output

    summary = hardware_details(name)
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_hardware(output.results(), summary.json_data())


@models_app.command("list")
def models_list(kv_dtype: KvDtypeOption = None, detail: DetailFlag = False, json_out: JsonFlag = False) -> None:
    """List the model catalog with parameter counts and KV bytes per token."""
    from pddplan.inputs.browse import model_rows
    from pddplan.report import browse_tables, output

    rows = model_rows(kv_dtype)
    if json_out:
        output.emit_json(rows)
    else:
        browse_tables.print_models_list(output.results(), [r.json_data() for r in rows], detail)


@models_app.command("show")
def models_show(name: ModelNameArg, kv_dtype: KvDtypeOption = None, json_out: JsonFlag = False) -> None:
    """Show a model's parameters, weights and KV bytes per token, with each figure's formula."""
    from pddplan.inputs.browse import model_details
    from pddplan.report import browse_tables, output

    summary = model_details(name, kv_dtype)
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_model(output.results(), summary.json_data())


@app.command("architectures")
def architectures_list(json_out: JsonFlag = False) -> None:
    """List the architectures pddplan plans (each a module in pddplan/architectures)."""
    from pddplan.architectures import describe
    from pddplan.report import browse_tables, output

    rows = describe()
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.architectures_table([r.json_data() for r in rows]))


@workloads_app.command("list")
def workloads_list(json_out: JsonFlag = False) -> None:
    """List the shipped workloads."""
    from pddplan.inputs.browse import workload_rows
    from pddplan.report import browse_tables, output

    rows = workload_rows()
    if json_out:
        output.emit_json(rows)
    else:
        output.results().print(browse_tables.workloads_table([r.json_data() for r in rows]))


@workloads_app.command("show")
def workloads_show(name: WorkloadNameArg, json_out: JsonFlag = False) -> None:
    """Show (and validate) one workload."""
    from pddplan.inputs.browse import workload_details
    from pddplan.report import browse_tables, output

    summary = workload_details(name)
    if json_out:
        output.emit_json(summary)
    else:
        browse_tables.print_workload(output.results(), summary.json_data())


# -- schemas --------------------------------------------------------------------------------------
SchemaOutOption = Annotated[
    Path | None, typer.Option("--out", help="Write one <kind>.schema.json per input kind here.")
]
SchemaKindArg = Annotated[
    str | None,
    typer.Argument(help="One kind to print: hardware, model, workload (the default), plan, baseline."),
]
SchemaMarkdownOption = Annotated[
    Path | None, typer.Option("--markdown", help="Write a Markdown reference of every field and default.")
]
OutputSchemasOption = Annotated[
    Path | None,
    typer.Option("--outputs", help="Write one <command>.output.schema.json per command's --json output here."),
]


@app.command("schema")
def schema(
    out: SchemaOutOption = None,
    kind: SchemaKindArg = None,
    markdown_path: SchemaMarkdownOption = None,
    outputs: OutputSchemasOption = None,
) -> None:
    """Print one input file kind's JSON Schema (default: the workload's), or write every kind's
    (`--out DIR`, for editors and CI) and every command's --json output's (`--outputs DIR`)."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.report import output
    from pddplan.report.schemas import SchemaFlags

    flags = SchemaFlags(**given)
    for path in flags.written():
        output.wrote(path)
    printed = flags.printed()
    if printed is not None:
        output.emit_json(printed)
