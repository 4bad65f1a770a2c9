"""The README and the generated docs stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pddplan.cli import app
from pddplan.report.schemas import markdown_reference

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _command_names() -> list[str]:
    names = [command.name for command in app.registered_commands if command.name]
    names += [group.name for group in app.registered_groups if group.name]
    return sorted(names)


@pytest.mark.parametrize("name", _command_names())
def test_every_command_is_in_the_readme(name: str) -> None:
    assert re.search(rf"`pddplan {re.escape(name)}\b", README), f"README does not document `pddplan {name}`"


def test_readme_starts_with_the_two_setup_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert blocks[0].startswith("python3 -m venv .venv") and "pddplan optimize workloads/" in blocks[0]
    assert "pip install '.[test]'" in blocks[1] and "pytest" in blocks[1]


def test_ci_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    for block in blocks[:2]:
        # CI adds -q to pip; otherwise the commands are the README's, word for word
        assert block.replace("pip install ", "pip install -q ") in ci


def test_inputs_reference_is_current() -> None:
    committed = (ROOT / "docs" / "inputs.md").read_text(encoding="utf-8")
    assert committed == markdown_reference(), "regenerate with: pddplan schema --markdown docs/inputs.md"


def test_shared_figures_are_documented_once() -> None:
    """docs/model.md lists the keys evaluate and simulate share; the list is exactly those keys."""
    import re

    from pddplan.evaluate import evaluate
    from pddplan.inputs import load_plan, load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.scenarios import build_scenario
    from pddplan.simulate import simulate

    text = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    section = text.split("### The figures `evaluate` and `simulate` share", 1)[1].split("\n## ", 1)[0]
    documented = {
        key
        for row in section.splitlines()
        if row.startswith("| `")
        for key in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])
    }
    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    scenario = build_scenario(load_plan(str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")), inputs)
    shared = set(evaluate(scenario).to_output().json_data()) & set(simulate(scenario, 500, 0).summary.json_data())
    assert documented == shared
