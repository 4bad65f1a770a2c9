"""The committed JSON Schemas in schemas/ must equal what the specs generate now (drift test), and
`pddplan schema --out DIR` writes one file per input kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pddplan.report.schemas import schema_for, schema_kinds, write_schemas
from pddplan.support.jsontext import to_json

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "schemas"
KINDS = list(schema_kinds())


def test_the_core_kinds_exist() -> None:
    assert {"hardware", "model", "workload", "plan"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_committed_schema_matches_the_specs(kind: str) -> None:
    path = COMMITTED / f"{kind}.schema.json"
    assert path.is_file(), f"schemas/{kind}.schema.json is not committed; run `pddplan schema --out schemas`"
    assert json.loads(path.read_text(encoding="utf-8")) == schema_for(kind), (
        f"schemas/{kind}.schema.json is stale; run `pddplan schema --out schemas`"
    )
    # byte for byte what `pddplan schema --out` writes, so regenerating gives no diff
    assert path.read_text(encoding="utf-8") == to_json(schema_for(kind)) + "\n"


def test_no_stray_committed_schemas() -> None:
    committed = {p.name for p in COMMITTED.glob("*.schema.json")}
    assert committed == {f"{kind}.schema.json" for kind in KINDS}


def test_schemas_are_strict() -> None:
    """Unknown keys are refused by the loader, and the schemas say so for editors."""
    for kind in KINDS:
        schema = schema_for(kind)
        assert schema.get("additionalProperties") is False, kind
        for name, definition in schema.get("$defs", {}).items():
            if definition.get("type") == "object" and "properties" in definition:
                assert definition.get("additionalProperties") is False, f"{kind}: $defs.{name}"


def test_workload_schema_required_fields() -> None:
    schema = schema_for("workload")
    assert set(schema["required"]) == {
        "name",
        "model",
        "arrival",
        "prompt_tokens",
        "output_tokens",
        "hit_rate",
        "sla",
        "prices",
        "deployment",
    }


def test_write_schemas(tmp_path: Path) -> None:
    paths = write_schemas(tmp_path / "out")
    assert [p.name for p in paths] == [f"{kind}.schema.json" for kind in KINDS]
    for kind, path in zip(KINDS, paths, strict=True):
        assert json.loads(path.read_text()) == schema_for(kind)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(f"{kind}.schema.json" for kind in KINDS)


def test_schema_command_writes_one_file_per_kind(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    result = cli("schema", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{kind}.schema.json" for kind in KINDS)
    assert result.stderr.splitlines() == [f"wrote {out / f'{kind}.schema.json'}" for kind in KINDS]
    for kind in KINDS:
        text = (out / f"{kind}.schema.json").read_text()
        assert text == to_json(schema_for(kind)) + "\n"


def test_schema_command_prints_one_kind(cli: Any) -> None:
    for kind in KINDS:
        result = cli("schema", kind)
        assert result.exit_code == 0
        assert result.stderr == ""
        assert json.loads(result.stdout) == schema_for(kind)
