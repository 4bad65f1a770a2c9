"""Mutation fuzz of pddplan's input files, run by tests/test_fuzz_inputs.py in a child process
under a memory limit (RLIMIT_AS, the `ulimit -v` of the shell).

Hypothesis mutates the shipped workload, plan and GPU profile (a value's type, sign, NaN and
infinity, huge and tiny numbers, deleted keys, duplicated lines) and runs `workloads show`,
`hardware show` and `evaluate` on the result in-process. Every run must end with exit 0 (and a
result on stdout), 2 or 3 (and exactly one `error:` line on stderr), never an exception; the
parent test bounds the whole run's time and memory.

Usage: python tests/fuzz_inputs.py EXAMPLES_PER_TARGET
"""

from __future__ import annotations

import copy
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner
from typer_once import install_command_cache

from pddplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
install_command_cache()
RUNNER = CliRunner()
#: No per-example deadline: hypothesis re-runs a slow example and fails as "flaky" when the rerun
#: is fast, which a loaded CI machine can cause without any fault in pddplan. A hang is caught by
#: the whole run's wall clock instead (tests/test_fuzz_inputs.py, WALL_CLOCK_S).
DEADLINE = None
#: CI replays a fixed sequence of examples (as tests/conftest.py's "ci" profile); elsewhere new ones
DERANDOMIZE = bool(os.environ.get("CI"))

ODD_VALUES = st.one_of(
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 0, -1, 0.5, 1e-300, 1e300, 2**63, -(2**63), 10**7, "", "abc", None, True]
    ),
    st.sampled_from([[], {}, [1, 2], {"x": 1}]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=6),
)
#: ("set", value), ("delete", None), ("scale", 10**k), ("duplicate line", None)
MUTATION = st.one_of(
    st.tuples(st.just("set"), ODD_VALUES),
    st.tuples(st.just("delete"), st.none()),
    st.tuples(st.just("scale"), st.integers(min_value=-15, max_value=15)),
    st.tuples(st.just("duplicate line"), st.none()),
)
MUTATIONS = st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), MUTATION), min_size=1, max_size=3)


def paths_of(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key and list item of a parsed document, by its path (the root excluded)."""
    out: list[tuple[Any, ...]] = [path] if path else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += paths_of(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += paths_of(value, (*path, index))
    return out


def apply(text: str, mutations: list[tuple[int, tuple[str, Any]]]) -> str:
    """The YAML text with each mutation applied in turn (at a path picked by its index)."""
    for pick, (kind, argument) in mutations:
        if kind == "duplicate line":
            lines = text.splitlines()
            at = pick % len(lines)
            text = "\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]]) + "\n"
            continue
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            continue  # an earlier duplicated line broke the document; nothing to walk
        if not isinstance(data, dict):
            continue
        paths = paths_of(data)
        path = paths[pick % len(paths)]
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        if kind == "delete":
            del parent[key]
        elif kind == "set":
            parent[key] = copy.deepcopy(argument)
        elif isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
            parent[key] = parent[key] * 10.0**argument
        text = yaml.safe_dump(data, sort_keys=False)
    return text


def check(args: list[str]) -> None:
    """One run ends as promised: exit 0 with a result, or 2/3 with one error line; no exception."""
    result = RUNNER.invoke(app, args)
    exception = result.exception
    assert exception is None or isinstance(exception, SystemExit), (args, repr(exception))
    assert result.exit_code in (0, 2, 3), (args, result.exit_code, result.stderr[-2000:])
    if result.exit_code == 0:
        assert result.stdout.strip(), args
    else:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr[-2000:])


def folder() -> Path:
    """A folder holding the three files, wired together: the workload offers the GPU profile by
    its file name, and the plan places prefill and relay on it."""
    out = Path(tempfile.mkdtemp(prefix="pddplan-fuzz-"))
    profile = (ROOT / "hardware_profiles" / "gpu-a.yaml").read_text(encoding="utf-8")
    workload = (ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8")
    plan = (ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml").read_text(encoding="utf-8")
    (out / "gpu-a.yaml").write_text(profile, encoding="utf-8")
    (out / "workload.yaml").write_text(workload.replace("{type: gpu-a,", "{type: gpu-a.yaml,"), encoding="utf-8")
    (out / "plan.yaml").write_text(plan.replace("gpu: gpu-a,", "gpu: gpu-a.yaml,"), encoding="utf-8")
    return out


COMMANDS = {
    "workload.yaml": [["workloads", "show", "{workload}"], ["evaluate", "{plan}", "{workload}"]],
    "plan.yaml": [["evaluate", "{plan}", "{workload}"]],
    "gpu-a.yaml": [["hardware", "show", "{gpu}"], ["evaluate", "{plan}", "{workload}"]],
}


def fuzz(target: str, examples: int) -> None:
    base = folder()
    original = (base / target).read_text(encoding="utf-8")
    files = {"workload": base / "workload.yaml", "plan": base / "plan.yaml", "gpu": base / "gpu-a.yaml"}
    for command in COMMANDS[target]:  # the wiring itself is sound
        check([part.format(**{k: str(v) for k, v in files.items()}) for part in command])

    @settings(
        max_examples=examples,
        deadline=DEADLINE,
        derandomize=DERANDOMIZE,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(MUTATIONS)
    def one(mutations: list[tuple[int, tuple[str, Any]]]) -> None:
        (base / target).write_text(apply(original, mutations), encoding="utf-8")
        for command in COMMANDS[target]:
            check([part.format(**{k: str(v) for k, v in files.items()}) for part in command])

    one()


if __name__ == "__main__":
    per_target = int(sys.argv[1])
    for name in COMMANDS:
        fuzz(name, per_target)
        print(f"{name}: {per_target} mutated files, every run ended as promised", flush=True)
