"""JSON Schemas of the input file kinds, generated from the specs and committed in `schemas/`."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

import pddplan.architectures  # noqa: F401  (registers the architecture names the plan schema lists)
from pddplan.analyses.agreement import AgreementRow
from pddplan.analyses.bathtub import Bathtub
from pddplan.analyses.cache_plan import CachePlan
from pddplan.analyses.gate import Gate
from pddplan.analyses.paper import Paper
from pddplan.analyses.sweep import Sweep
from pddplan.analyses.whatif import WhatIfOutput
from pddplan.architectures.base import ArchitectureInfo
from pddplan.calibration.outputs import Accuracy, Calibrate, Estimate
from pddplan.errors import InputError
from pddplan.evaluate.outputs import Evaluation
from pddplan.export.outputs import Export
from pddplan.inputs.outputs import Catalog
from pddplan.optimize.outputs import Optimize, Survive
from pddplan.simulate.outputs import Simulation
from pddplan.specs.baseline import Baseline
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support.jsontext import to_json
from pddplan.support.loading import writable_folder, write_atomic
from pddplan.trace.outputs import CacheCurve, TraceImport

OUTPUTS: dict[str, Any] = {
    "evaluate": Evaluation,
    "simulate": Simulation,
    "optimize": Optimize,
    "estimate": Estimate,
    "gate": Gate,
    "architectures": list[ArchitectureInfo],
    "agreement": list[AgreementRow],
    "bathtub": Bathtub,
    "sweep": Sweep,
    "paper": Paper,
    "hardware-show": Catalog,
    "hardware-list": list[Catalog],
    "models-show": Catalog,
    "models-list": list[Catalog],
    "workloads-show": Catalog,
    "workloads-list": list[Catalog],
    "accuracy": Accuracy,
    "calibrate": Calibrate,
    "export": Export,
    "cache-plan": CachePlan,
    "whatif": WhatIfOutput,
    "survive": Survive,
    "trace-import": TraceImport,
    "cache-curve": CacheCurve,
}
"""Each command's typed `--json` result, by the file name its schema is written under."""


def output_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of command output `name` (a key of OUTPUTS), generated from its type."""
    schema = TypeAdapter(OUTPUTS[name]).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", f"pddplan {name} --json")
    return schema


def validate_output(name: str, data: Any) -> None:
    """Raise pydantic's ValidationError unless `data` is what command output `name` prints."""
    TypeAdapter(OUTPUTS[name]).validate_python(data, strict=False)


def schema_kinds() -> dict[str, type[BaseModel]]:
    """Input kinds by name."""

    return {
        "hardware": HardwareProfile,
        "model": ModelArchitecture,
        "workload": Workload,
        "plan": Plan,
        "baseline": Baseline,
    }


def schema_for(kind: str) -> dict[str, Any]:
    """The JSON Schema of one input kind."""
    kinds = schema_kinds()
    if kind not in kinds:
        raise InputError(f"unknown schema kind '{kind}'; expected one of: {', '.join(kinds)}")
    return kinds[kind].model_json_schema()


def write_output_schemas(folder: Path) -> list[Path]:
    """Write `<command>.output.schema.json` for every command's --json output into `folder`."""

    writable_folder(folder, "--outputs")
    paths = []
    for name in OUTPUTS:
        path = folder / f"{name}.output.schema.json"
        write_atomic(path, to_json(output_schema(name)) + "\n")
        paths.append(path)
    return paths


def write_schemas(folder: Path) -> list[Path]:
    """Write `<kind>.schema.json` for every kind into `folder`; return the paths."""
    writable_folder(folder, "--out")
    paths = []
    for kind in schema_kinds():
        path = folder / f"{kind}.schema.json"
        write_atomic(path, to_json(schema_for(kind)) + "\n")
        paths.append(path)
    return paths


@dataclass(frozen=True)
class SchemaFlags:
    """Every option of `pddplan schema`, by the command's own parameter names: which files to write,
    or which kind's schema to print when no file is asked for."""

    out: Path | None = None
    kind: str | None = None
    markdown_path: Path | None = None
    outputs: Path | None = None

    def written(self) -> Iterator[Path]:
        """Write the files asked for, yielding each as it is written: every command's output
        schema (`--outputs`), then the Markdown reference (`--markdown`), then every input kind's
        schema (`--out`)."""
        if self.outputs is not None:
            yield from write_output_schemas(self.outputs)
        if self.markdown_path is not None:
            write_atomic(self.markdown_path, markdown_reference())
            yield self.markdown_path
        if self.out is not None:
            yield from write_schemas(self.out)

    def printed(self) -> dict[str, Any] | None:
        """The schema to print: `kind`'s (default: workload) when no file is asked for, else None."""
        if self.out is None and self.markdown_path is None and self.outputs is None:
            return schema_for(self.kind or "workload")
        return None


def markdown_reference() -> str:
    """Every field of every input kind with its type, default and description, as Markdown."""
    lines = [
        "# Input files: fields and defaults",
        "",
        "Generated by `pddplan schema --markdown docs/inputs.md` from the specs (a test keeps it in step).",
        "A field without a default is required. Units are in the field names.",
    ]
    for kind, model in schema_kinds().items():
        lines += ["", f"## {kind}", ""]
        lines += _model_rows(model, "")
    return "\n".join(lines) + "\n"


def _model_rows(model: type[BaseModel], prefix: str, seen: frozenset[type[BaseModel]] = frozenset()) -> list[str]:

    rows = ["| field | type | default | description |", "|---|---|---|---|"] if not prefix else []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = field.annotation
        members = _models_in(annotation)
        type_name = _type_name(annotation)
        extra = field.json_schema_extra
        if callable(extra):  # values known only at run time (the registered architectures)
            schema: dict[str, Any] = {}
            extra(schema)
            if "enum" in schema:
                type_name = "one of " + ", ".join(repr(value) for value in schema["enum"])
        if field.default is PydanticUndefined and field.default_factory is None:
            default = "required"
        elif field.default_factory is not None:
            default = "see below" if members else "empty"
        elif isinstance(field.default, BaseModel):
            default = "see below"
        else:
            default = f"`{field.default!r}`"
        description = (field.description or "").replace("|", "/")
        rows.append(f"| `{path}` | {type_name} | {default} | {description} |")
        nested += [(path, member) for member in members if member not in seen]
    for path, member in nested:
        rows += _model_rows(member, f"{path}.", seen | {model})
    return rows


def _models_in(annotation: Any) -> list[type[BaseModel]]:

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def _type_name(annotation: Any) -> str:
    """A readable type: `float`, `int or none`, `one of 'a', 'b'`, `list of HitBucket`."""

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}" if args else "map"
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))
