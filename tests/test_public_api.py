"""The package top: version, the commands as library calls, py.typed, -h and --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of
from typer.main import get_command
from typer.testing import CliRunner

import pddplan
from pddplan.cli import app, app_for

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"


def test_the_commands_are_library_calls_that_match_the_cli(cli: Any) -> None:
    report = pddplan.optimize_workload("chat-short-lowhit", ["pd-intra"], verify=False)
    from_cli = json_of(cli("optimize", "chat-short-lowhit", "-a", "pd-intra", "--no-verify", "--json"))
    assert report.to_output().json_data() == from_cli
    evaluation = pddplan.evaluate_plan(PLAN, "pdd-agent-64k")
    assert (
        evaluation.to_output().cost_usd_per_hour
        == json_of(cli("evaluate", str(PLAN), "pdd-agent-64k", "--json"))["cost_usd_per_hour"]
    )
    assert pddplan.load_workload("pdd-agent-64k").name == "pdd-agent-64k"


#: `pddplan.api`'s function for each command of the command line
API_OF = {
    "optimize": "optimize",
    "evaluate": "evaluate",
    "simulate": "simulate",
    "estimate": "estimate",
    "accuracy": "accuracy",
    "calibrate": "calibrate",
    "export": "export",
    "whatif": "whatif",
    "survive": "survive",
    "bathtub": "bathtub",
    "sweep": "sweep",
    "paper": "paper",
    "agreement": "agreement",
    "gate": "gate",
    "trace import": "trace_import",
    "cache-plan": "cache_plan",
    "cache-curve": "cache_curve",
    "architectures": "architectures",
    "hardware list": "hardware_list",
    "hardware show": "hardware_show",
    "models list": "models_list",
    "models show": "models_show",
    "workloads list": "workloads_list",
    "workloads show": "workloads_show",
    "schema": "schema",
}


def _commands() -> set[str]:
    """Every command of the command line, as a user types it (`trace import`)."""
    from typer.main import get_command

    from pddplan.cli import app

    root = get_command(app)
    names = set()
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        subcommands = getattr(command, "commands", None)
        names |= {f"{name} {sub}" for sub in subcommands} if subcommands else {name}
    return names


def test_every_command_is_a_library_call() -> None:
    from pddplan import api

    assert set(API_OF) == _commands()
    for name in API_OF.values():
        assert callable(getattr(api, name)), name


def test_the_library_calls_return_what_json_prints(cli: Any, tmp_path: Path) -> None:
    """A few cheap commands, called from Python and from the command line: the same document."""
    from pddplan import api

    assert [a.json_data() for a in api.architectures()] == json_of(cli("architectures", "--json"))
    assert api.hardware_show("h200").json_data() == json_of(cli("hardware", "show", "h200", "--json"))
    estimate = api.estimate("llama-3.1-8b", "h100-sxm", 1, prefill=4096)
    assert estimate.json_data() == json_of(
        cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1", "--prefill", "4096", "--json")
    )
    evaluation = api.evaluate(str(PLAN), "pdd-agent-64k", rate=3.0)
    assert evaluation.json_data() == json_of(cli("evaluate", str(PLAN), "pdd-agent-64k", "--rate", "3", "--json"))
    assert evaluation.capacity is not None
    files = api.export(str(PLAN), "pdd-agent-64k", "sglang", out=tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(files.files)


PACKAGES = ("analyses", "calibration", "evaluate", "optimize", "perf", "scenarios", "simulate", "trace")


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_names_its_verbs_and_loads_them_on_first_use(package: str) -> None:
    """`from pddplan.evaluate import evaluate`: every verb a package's `__init__` names resolves to
    a function or class of that package, none is also a submodule's name (a loaded submodule
    would shadow it), and importing the package alone loads none of its modules."""
    import importlib
    import pkgutil

    module = importlib.import_module(f"pddplan.{package}")
    verbs = [name for name in dir(module) if not name.startswith("_") and callable(getattr(module, name))]
    assert verbs, package
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    for name in verbs:
        value = getattr(module, name)
        assert value.__module__.startswith(f"pddplan.{package}."), (package, name)
        assert name not in submodules, (package, name)
    code = f"import sys, pddplan.{package}; print(sorted(m for m in sys.modules if m.startswith('pddplan.{package}.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    with pytest.raises(AttributeError, match="no attribute"):
        module.no_such_verb  # noqa: B018


def test_importing_the_package_loads_no_model_code() -> None:
    """`import pddplan` stays instant: numpy and the specs load on the first library call."""
    code = "import sys, pddplan; print('numpy' in sys.modules, 'pddplan.inputs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        pddplan.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_the_package_says_it_is_typed() -> None:
    assert (ROOT / "pddplan" / "py.typed").is_file()


def test_version_and_short_help(cli: Any) -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"pddplan {pddplan.__version__}"
    assert cli("-h").stdout == cli("--help").stdout
    assert "Usage: " in cli("optimize", "-h").stdout


def test_shell_completion_can_be_shown(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without this variable typer ignores the shell named and detects the parent process's shell,
    # which fails (exit 1, "Shell  not supported") when the test runner's parent is not a shell.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    bash = cli("--show-completion", "bash")  # CliRunner names the program "root"
    assert bash.exit_code == 0 and "_root_completion()" in bash.stdout, (bash.exit_code, bash.stderr)
    zsh = cli("--show-completion", "zsh")
    assert zsh.exit_code == 0 and zsh.stdout.startswith("#compdef root"), (zsh.exit_code, zsh.stderr)


def test_shipped_files_name_their_schema_for_editors() -> None:
    """A `yaml-language-server` comment lets editors validate and complete the YAML against the
    committed JSON Schemas (the path is checked to exist from the file's folder)."""
    for folder, kind in (("workloads", "workload"), ("hardware_profiles", "hardware"), ("examples/plans", "plan")):
        for path in sorted((ROOT / folder).glob("*.yaml")):
            first = path.read_text(encoding="utf-8").splitlines()[0]
            assert first.startswith("# yaml-language-server: $schema="), path
            schema = (path.parent / first.split("$schema=", 1)[1]).resolve()
            assert schema == (ROOT / "schemas" / f"{kind}.schema.json").resolve(), path
            assert schema.is_file()


def test_a_command_runs_on_an_app_of_that_command_alone(cli: Any) -> None:
    """`main` builds only the command named (typer builds every parser it holds before parsing);
    help, a group's subcommands, a misspelt name and root options still behave as with the whole
    app."""
    assert sorted(get_command(app_for(["optimize", "w.yaml"])).commands) == ["optimize"]  # type: ignore[attr-defined]
    assert sorted(get_command(app_for(["hardware", "list"])).commands) == ["hardware"]  # type: ignore[attr-defined]
    assert app_for(["optimize"]) is app_for(["optimize", "--json"])  # one app per name
    assert app_for([]) is app and app_for(["--help"]) is app and app_for(["optimze"]) is app
    whole = CliRunner().invoke(app, ["optimize", "--help"])
    assert cli("optimize", "--help").stdout == whole.stdout
    assert "Did you mean 'optimize'" in cli("optimze").stderr
    assert cli("hardware", "list", "--json").exit_code == 0


def test_a_rate_or_a_budget_sets_the_mode_as_on_the_command_line() -> None:
    """`optimize_workload(..., rate=2.0)` planned for the workload's own 4 req/s in BCR mode (the rate
    dropped), a budget the same; an unknown mode ran as BCR, and 'rate' without a rate failed on an
    assert deep in the program. Now the mode follows from what is given, as --rate and --budget
    make it, and the rest is refused in one line."""
    from pddplan.errors import InputError
    from pddplan.optimize.options import OptimizeOptions

    assert OptimizeOptions(rate=2.0).mode == "rate" and OptimizeOptions(budget_per_hour=30.0).mode == "budget"
    assert OptimizeOptions().mode == "bcr" and OptimizeOptions(mode="rate", rate=2.0).rate == 2.0
    for options, words in (
        ({"mode": "foo"}, "expected one of bcr, rate, budget"),
        ({"mode": "rate"}, "give the rate"),
        ({"mode": "budget"}, "give the budget"),
        ({"rate": 2.0, "budget_per_hour": 30.0}, "not both"),
        ({"budget_per_hour": -1.0}, "budget_per_hour = -1.0"),
    ):
        with pytest.raises(InputError, match=words):
            OptimizeOptions(**options)
    report = pddplan.optimize_workload("chat-short-lowhit", "pd-intra", rate=2.0, verify=False)
    assert report.options.mode == "rate" and [r.name for r in report.results] == ["pd-intra"]
    assert report.best is not None and report.best.evaluation is not None
    assert report.best.evaluation.rate_rps == pytest.approx(2.0)


def test_the_module_example_runs_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pddplan.api`'s docstring printed `report.best.architecture`, which does not exist."""
    import textwrap

    from pddplan import api

    monkeypatch.chdir(ROOT)  # the example names the repository's files
    exec(textwrap.dedent(str(api.__doc__).split("\n\n")[1]), {})
    name, cost = capsys.readouterr().out.split()
    assert name == "pdd" and float(cost) > 0


def test_file_arguments_may_be_strings(tmp_path: Path) -> None:
    """trace_import, cache_curve, cache_plan, calibrate and gate took only Path objects: a string
    failed with AttributeError ('str' object has no attribute 'stat')."""
    from pddplan import api
    from pddplan.errors import InputError

    trace = str(ROOT / "examples/traces/mooncake-synthetic.jsonl")
    assert api.trace_import(trace).requests > 0
    with pytest.raises(InputError, match=r"nope\.json"):
        api.gate(str(tmp_path / "nope.json"))


def test_survive_takes_both() -> None:
    """`--survive both`, as the error and the help offer it, was refused."""
    from pddplan.optimize.survive import survive_kinds

    assert survive_kinds("both") == survive_kinds("instance,line") == frozenset({"instance", "line"})
