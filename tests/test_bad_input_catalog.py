"""The bad-input catalog: every number of the shipped workload, GPU profile and plan given a value
no run can use, every numeric flag given one, and every file reader given a file that is not one.

Each case must exit 2 with one `error:` line on stderr that names the field (or flag, or file) and
the value, nothing on stdout and no traceback. The cases are generated from the shipped files, so a
field added to a spec is in the catalog the day it ships.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "workloads" / "pdd-agent-64k.yaml"
HARDWARE = ROOT / "hardware_profiles" / "gpu-a.yaml"
PLAN = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
SMALL = str(ROOT / "workloads" / "chat-short-lowhit.yaml")

#: a bad value and how the error line shows it
BAD_VALUES: list[tuple[Any, str]] = [
    (math.nan, "NaN"),
    (math.inf, "Infinity"),
    (-1, "-1"),
    ("abc", "abc"),
    (1e300, "1e+300"),
]
#: text, not numbers: names, citations and notes
TEXT_KEYS = {"sources", "name", "description", "source", "price_source", "stands_for", "note", "as_of"}


def numeric_leaves(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(path, value) of every number in a parsed YAML document, outside text and citations."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in TEXT_KEYS:
                yield from numeric_leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from numeric_leaves(value, (*path, index))
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield path, data


def shown_path(path: tuple[str | int, ...]) -> str:
    """The field path as error lines spell it: `deployment.wan_lines[0].rtt_ms`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def mutated(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    copied = copy.deepcopy(data)
    node = copied
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copied


def field_cases(kind: str, source: Path, keep: Any = None) -> list[Any]:
    document = yaml.safe_load(source.read_text(encoding="utf-8"))
    cases = []
    for path, _ in numeric_leaves(document):
        if keep is not None and not keep(path):
            continue
        for value, shown in BAD_VALUES:
            case_id = f"{kind}:{shown_path(path)}={shown}"
            cases.append(pytest.param(kind, document, path, value, shown, id=case_id))
    return cases


def _one_stack(path: tuple[str | int, ...]) -> bool:
    """Every figure and factor of the profile, and the factors of its first serving stack only
    (the other stacks repeat the same fields)."""
    return path[0] != "stack_efficiency" or path[1] == "nim-1.8"


FIELD_CASES = (
    field_cases("workload", WORKLOAD) + field_cases("hardware", HARDWARE, _one_stack) + field_cases("plan", PLAN)
)


@pytest.mark.parametrize(("kind", "document", "path", "value", "shown"), FIELD_CASES)
def test_a_bad_number_in_a_file_is_one_line_naming_field_and_value(
    cli: Any, tmp_path: Path, kind: str, document: Any, path: tuple[str | int, ...], value: Any, shown: str
) -> None:
    target = tmp_path / f"{kind}.yaml"
    target.write_text(yaml.safe_dump(mutated(document, path, value)), encoding="utf-8")
    if kind == "workload":
        result = cli("workloads", "show", str(target))
    elif kind == "hardware":
        result = cli("hardware", "show", str(target))
    else:
        result = cli("evaluate", str(target), str(WORKLOAD))
    # a hardware figure is `{value: X, source: ...}`: the line names the figure, not `.value`
    field = shown_path(path[:-1] if path[-1] == "value" else path)
    one_error_line(result, str(target), field, shown)


ESTIMATE = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
FLAG_CASES: list[tuple[tuple[str, ...], str, str]] = []
_SWEEP_NAMES = {"abc": "--values"}  # not a number: the flag is named; a number: the field it sets
for _value in ("nan", "inf", "-1", "0", "abc", "1e300"):
    FLAG_CASES += [
        (("optimize", SMALL, "--rate", _value), "--rate", _value),
        (("optimize", SMALL, "--budget", _value), "--budget", _value),
        (("optimize", SMALL, "--time-limit", _value), "--time-limit", _value),
        (
            ("sweep", SMALL, "--param", "arrival.rate_rps", "--values", _value),
            "--values" if _value == "abc" else "rate_rps",
            _value,
        ),
    ]
    if _value != "0":
        FLAG_CASES += [
            (("optimize", SMALL, "--mip-gap", _value), "--mip-gap", _value),
            (("optimize", SMALL, "--min-served", _value), "--min-served", _value),
        ]
for _value in ("-1", "0", "abc", "1e300", "99999999999999999999999"):
    FLAG_CASES += [
        (("optimize", SMALL, "--requests", _value), "--requests", _value),
        (("optimize", SMALL, "--jobs", _value), "--jobs", _value),
        (("simulate", str(PLAN), str(WORKLOAD), "--requests", _value), "--requests", _value),
        (("bathtub", SMALL, "--points", _value), "--points", _value),
        (("bathtub", SMALL, "--chunk", _value), "--chunk", _value),
        (("sweep", SMALL, "--param", "arrival.rate_rps", "--values", "1", "--jobs", _value), "--jobs", _value),
        ((*ESTIMATE, "--tp", _value, "--prefill", "100"), "--tp", _value),
        ((*ESTIMATE, "--prefill", _value), "--prefill", _value),
        ((*ESTIMATE, "--decode-batch", _value, "--context", "100"), "--decode-batch", _value),
        ((*ESTIMATE, "--extend", _value, "--context", "100"), "--extend", _value),
    ]
    if _value != "0":
        FLAG_CASES += [
            (("optimize", SMALL, "--seed", _value), "--seed", _value),
            (("simulate", str(PLAN), str(WORKLOAD), "--seed", _value), "--seed", _value),
            ((*ESTIMATE, "--prefill", "100", "--cached", _value), "--cached", _value),
            ((*ESTIMATE, "--decode-batch", "1", "--context", _value), "--context", _value),
        ]
FLAG_CASES += [
    (("optimize", SMALL, "--solver", "gurobi"), "--solver", "gurobi"),
    (("optimize", SMALL, "--relay", "nowhere"), "--relay", "nowhere"),
    (("simulate", str(PLAN), str(WORKLOAD), "--per-request", "records.parquet"), "--per-request", ".parquet"),
    (("optimize", SMALL, "-a", "pdx"), "architecture", "pdx"),
    (("bathtub", SMALL, "--mode", "sideways"), "--mode", "sideways"),
    (("sweep", SMALL, "--param", "arrival.rate_rps", "--range", "1:2:0"), "--range", "1:2:0"),
    (("sweep", SMALL, "--param", "arrival.rate_rps", "--range", "a:b:c"), "--range", "a:b:c"),
    (("sweep", SMALL, "--param", "arrival.rate_rps", "--range", "1:2:1e9"), "--range", "1e9"),
    (("sweep", SMALL, "--param", "arrival.no_such_field", "--values", "1"), "arrival.no_such_field", "unknown field"),
    (("sweep", SMALL, "--param", "arrival.rate_rps", "--values", "1", "--backend", "mpi"), "--backend", "mpi"),
    ((*ESTIMATE, "--prefill", "100", "--kv-dtype", "fp3"), "--kv-dtype", "fp3"),
    ((*ESTIMATE, "--decode-batch", "1", "--context", "10", "--mtp", "1", "--accept", "nan"), "--accept", "nan"),
    ((*ESTIMATE, "--decode-batch", "1", "--context", "10", "--mtp", "-1", "--accept", "0.5"), "--mtp", "-1"),
    ((*ESTIMATE, "--prefill", "100", "--stack", "no-such-stack"), "stack", "no-such-stack"),
    (("estimate", "--model", "no-such-model", "--gpu", "h100-sxm", "--prefill", "1"), "model", "no-such-model"),
    (("estimate", "--model", "llama-3.1-8b", "--gpu", "no-such-gpu", "--prefill", "1"), "GPU", "no-such-gpu"),
    (("evaluate", str(PLAN), "no-such-workload"), "workload", "no-such-workload"),
    (("workloads", "show", "no-such-workload"), "workload", "no-such-workload"),
    (("hardware", "show", "no-such-gpu"), "GPU", "no-such-gpu"),
    (("models", "show", "no-such-model"), "model", "no-such-model"),
]


@pytest.mark.parametrize(
    ("args", "flag", "value"), [pytest.param(*case, id=" ".join(case[0][1:])[-70:]) for case in FLAG_CASES]
)
def test_a_bad_flag_is_one_line_naming_flag_and_value(cli: Any, args: tuple[str, ...], flag: str, value: str) -> None:
    line = one_error_line(cli(*args), flag)
    # as typed, or as Python spells the float it parsed (1e300 -> 1e+300)
    assert value in line or value.replace("e", "e+") in line, line


def _not_a_file(tmp_path: Path, kind: str, suffix: str) -> Path:
    """A path where a reader expects a file: a folder, a named pipe, a device, binary bytes, nothing."""
    path = tmp_path / f"input{suffix}"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # a reader that opened it would block forever: no writer ever comes
    elif kind == "device":
        path = Path("/dev/zero")  # endless: a reader without a size cap runs out of memory
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "empty":
        path.write_bytes(b"")
    return path


def _reader_args(reader: str, path: Path, tmp_path: Path) -> tuple[str, ...]:
    if reader == "workload":
        return ("workloads", "show", str(path))
    if reader == "hardware":
        return ("hardware", "show", str(path))
    if reader == "plan":
        return ("evaluate", str(path), str(WORKLOAD))
    if reader == "baseline":
        return ("gate", str(path))
    if reader == "measurements":
        return ("calibrate", str(path), "--gpu", "h100-sxm")
    if reader == "model":
        return ("estimate", "--model", str(path), "--gpu", "h100-sxm", "--prefill", "100")
    # a line-capacity trace, named by a workload
    workload = WORKLOAD.read_text(encoding="utf-8").replace(
        "fluctuation: {kind: ou, cv: 0.3, correlation_s: 10, step_s: 1}",
        f"fluctuation: {{kind: trace, trace_file: '{path}'}}",
        1,
    )
    assert "kind: trace" in workload
    wrapper = tmp_path / "with-trace.yaml"
    wrapper.write_text(workload, encoding="utf-8")
    return ("evaluate", str(PLAN), str(wrapper))


READERS = {
    "workload": ".yaml",
    "hardware": ".yaml",
    "plan": ".yaml",
    "baseline": ".json",
    "measurements": ".csv",
    "model": ".json",
    "line trace": ".csv",
}


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "binary", "empty"])
@pytest.mark.parametrize("reader", list(READERS))
def test_a_reader_given_no_usable_file_says_so_in_one_line(cli: Any, tmp_path: Path, reader: str, kind: str) -> None:
    path = _not_a_file(tmp_path, kind, READERS[reader])
    one_error_line(cli(*_reader_args(reader, path, tmp_path)), str(path))


def test_the_catalog_holds_at_least_150_cases() -> None:
    """The issue's floor, counted the way the closing note reports it."""
    total = len(FIELD_CASES) + len(FLAG_CASES) + len(READERS) * 5
    assert total >= 150, total
