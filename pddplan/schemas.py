"""JSON Schemas of the input file kinds, generated from the specs and committed in `schemas/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pddplan.errors import InputError
from pddplan.loading import write_atomic
from pddplan.report.output import to_json


def schema_kinds() -> dict[str, type[BaseModel]]:
    """Input kinds by name."""
    from pddplan.specs.baseline import Baseline
    from pddplan.specs.hardware import HardwareProfile
    from pddplan.specs.model import ModelArchitecture
    from pddplan.specs.plan import Plan
    from pddplan.specs.workload import Workload

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


def write_schemas(folder: Path) -> list[Path]:
    """Write `<kind>.schema.json` for every kind into `folder`; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in schema_kinds():
        path = folder / f"{kind}.schema.json"
        write_atomic(path, to_json(schema_for(kind)) + "\n")
        paths.append(path)
    return paths
