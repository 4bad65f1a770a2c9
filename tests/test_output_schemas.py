"""Every command's `--json` output validates against its model in `pddplan.report.output_schemas` (no
key missing, none extra, types as stated), and `pddplan schema --outputs` writes those schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of

from pddplan.report.schemas import OUTPUTS, output_schema, validate_output

ROOT = Path(__file__).resolve().parent.parent
PLAN = str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")
MEASUREMENTS = str(ROOT / "tests" / "data" / "measurements.csv")

COMMANDS: dict[str, tuple[str, ...]] = {
    "evaluate": ("evaluate", PLAN, "pdd-agent-64k"),
    "simulate": ("simulate", PLAN, "pdd-agent-64k", "--requests", "2000"),
    "optimize": ("optimize", "pdd-agent-64k", "--requests", "2000"),
    "estimate": ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "1000"),
    "gate": ("gate",),  # on the committed baseline's first scenario (one_scenario_baseline)
    "architectures": ("architectures",),
    "bathtub": ("bathtub", "pdd-agent-64k", "--points", "3"),
    "sweep": ("sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "2,4"),
    "hardware-show": ("hardware", "show", "gpu-a"),
    "hardware-list": ("hardware", "list"),
    "models-show": ("models", "show", "deepseek-v3.2"),
    "models-list": ("models", "list"),
    "workloads-show": ("workloads", "show", "pdd-agent-64k"),
    "workloads-list": ("workloads", "list"),
    "accuracy": ("accuracy",),
    "calibrate": ("calibrate", MEASUREMENTS, "--gpu", "h100-sxm"),
    "export": ("export", PLAN, "pdd-agent-64k", "--target", "k8s"),
    "survive": ("survive", PLAN, "pdd-agent-64k", "--survive", "instance"),
    "whatif": ("whatif", PLAN, "pdd-agent-64k", "--fail", "instance:decode", "--simulate", "--requests", "1000"),
    "cache-plan": (
        "cache-plan",
        str(ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"),
        "--like",
        "pdd-agent-64k",
        "--capacity",
        "0,1TB",
        "--usd-per-gb-month",
        "2",
        "-a",
        "pdd",
    ),
    "trace-import": ("trace", "import", str(ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl")),
    "cache-curve": (
        "cache-curve",
        str(ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"),
        "--model",
        "deepseek-v3.2",
        "--capacity",
        "10GB,1TB",
    ),
}


#: outputs validated by the test that runs their command anyway (`paper` takes a minute and more)
ELSEWHERE = {
    "paper": "tests/test_paper.py::test_paper_json_matches_its_schema",
    "agreement": "tests/test_agreement.py::test_agreement_on_the_workloads_named_matches_its_schema",
}


def test_every_output_has_a_command_here() -> None:
    assert set(COMMANDS) | set(ELSEWHERE) == set(OUTPUTS)
    assert not set(COMMANDS) & set(ELSEWHERE)


def one_scenario_baseline(folder: Path) -> Path:
    """The committed gate baseline with its first scenario only: every scenario of a gate report has
    the same fields, so one shows them (CI's last stage gates the whole baseline, and
    tests/test_terminal_width.py prints it)."""
    baseline = json.loads((ROOT / "examples" / "ci" / "baseline.json").read_text(encoding="utf-8"))
    path = folder / "baseline.json"
    path.write_text(json.dumps(baseline | {"scenarios": baseline["scenarios"][:1]}), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", list(COMMANDS))
def test_json_output_matches_its_schema(name: str, cli: Any, tmp_path: Path) -> None:
    args = COMMANDS[name]
    if name == "gate":
        args = (*args, str(one_scenario_baseline(tmp_path)))
    result = cli(*args, "--json")
    if name == "calibrate":  # warns on stderr about factors on their bounds
        assert result.exit_code == 0 and all(line.startswith("warning: ") for line in result.stderr.splitlines())
        data = json.loads(result.stdout)
    else:
        data = json_of(result)
    validate_output(name, data)


def test_an_output_with_a_stray_key_fails_validation(cli: Any) -> None:
    """The check can fail: an evaluate output with a key the model does not name is refused."""
    from pydantic import ValidationError

    data = json_of(cli(*COMMANDS["evaluate"], "--json"))
    with pytest.raises(ValidationError):
        validate_output("evaluate", data | {"cost_per_hour": data["cost_usd_per_hour"]})
    del data["cost_usd_per_hour"]
    with pytest.raises(ValidationError):
        validate_output("evaluate", data)


def test_schema_outputs_writes_one_schema_per_output(cli: Any, tmp_path: Path) -> None:
    result = cli("schema", "--outputs", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    for name in OUTPUTS:
        written = json.loads((tmp_path / f"{name}.output.schema.json").read_text())
        assert written == output_schema(name)
        assert written["$schema"].startswith("https://json-schema.org/")


def test_committed_output_schemas_are_current() -> None:
    folder = ROOT / "schemas" / "outputs"
    for name in OUTPUTS:
        committed = json.loads((folder / f"{name}.output.schema.json").read_text())
        assert committed == output_schema(name), f"regenerate with: pddplan schema --outputs {folder}"
