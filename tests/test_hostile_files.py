"""Hostile files: a key given twice, an alias bomb, special files where a file is read or written.
Each is refused in one line with exit 2 (never a traceback, a hang, or a replaced device)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent
AGENT = (ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8")


def test_a_key_given_twice_is_refused(cli: object, tmp_path: Path) -> None:
    """The last of two `rate_rps` used to win silently (4 then 400 evaluated at 400)."""
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.replace("  rate_rps: 4.0\n", "  rate_rps: 4.0\n  rate_rps: 400.0\n", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "key 'rate_rps' appears twice")  # type: ignore[operator]


def test_a_key_given_twice_in_json_is_refused(cli: object, tmp_path: Path) -> None:
    """A plan .json with `"count": 3, "count": 1` evaluated with 1 instance and exit 0 (the last
    won, as Python's json reads it); the YAML reader refused the same. A trace line too."""
    plan = tmp_path / "plan.json"
    plan.write_text('{"name": "p", "name": "q"}', encoding="utf-8")
    one_error_line(cli("evaluate", str(plan), "pdd-agent-64k"), str(plan), "key 'name' appears twice")  # type: ignore[operator]
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "timestamp": 5, "input_length": 10, "output_length": 5}\n', encoding="utf-8")
    one_error_line(cli("trace", "import", str(trace)), "line 1", "key 'timestamp' appears twice")  # type: ignore[operator]


def test_an_alias_bomb_is_refused_at_the_first_alias(cli: object, tmp_path: Path) -> None:
    """Nine levels of nine aliases: 9^9 (387 million) leaves in about 400 bytes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "alias", "not accepted")  # type: ignore[operator]


def special_inputs(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    return {"fifo": fifo, "directory": folder, "device": Path("/dev/zero")}


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_special_files_are_not_read(cli: object, tmp_path: Path, kind: str) -> None:
    path = special_inputs(tmp_path)[kind]
    expected = "is a directory" if kind == "directory" else "not a regular file"
    one_error_line(cli("workloads", "show", str(path)), str(path), expected)  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["fifo", "symlink", "device", "directory"])
def test_special_files_are_not_replaced(cli: object, tmp_path: Path, kind: str) -> None:
    """The atomic write renamed a temporary file over whatever was there: as root it replaced
    /dev/full with a regular file, a symlink with a file, a named pipe under its reader."""
    target = tmp_path / "out.md"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        (tmp_path / "real.md").write_text("keep\n", encoding="utf-8")
        target.symlink_to(tmp_path / "real.md")
    elif kind == "device":
        target = Path("/dev/full")
    else:
        target.mkdir()
    before = os.lstat(target)
    one_error_line(cli("schema", "--markdown", str(target)), str(target), "writes only new or regular files")  # type: ignore[operator]
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not list(tmp_path.glob(".out.md.*.tmp"))
    if kind == "symlink":
        assert (tmp_path / "real.md").read_text(encoding="utf-8") == "keep\n"


def test_a_broken_hardware_file_is_reported_as_broken_not_unknown(cli: Any, tmp_path: Path) -> None:
    """A profile file with an unknown key used to be reported as "unknown GPU"."""
    from pddplan.support.catalog import catalog_dir

    profile = (catalog_dir("hardware_profiles") / "h100-sxm.yaml").read_text(encoding="utf-8")
    broken = tmp_path / "my-gpu.yaml"
    broken.write_text(profile.replace("name: h100-sxm", "name: my-gpu\ncolour: green", 1), encoding="utf-8")
    workload = (ROOT / "workloads" / "chat-short-lowhit.yaml").read_text(encoding="utf-8")
    assert "type: h100-sxm" in workload
    path = tmp_path / "w.yaml"
    path.write_text(workload.replace("type: h100-sxm", f"type: {broken}", 1), encoding="utf-8")
    line = one_error_line(cli("workloads", "show", str(path)), "colour", "unknown field")
    assert "unknown GPU" not in line
    path.write_text(workload.replace("type: h100-sxm", "type: h100-sxn", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "unknown GPU", "h100-sxm")


TRACE_ROW = '{"timestamp": %s, "input_length": %s, "output_length": 10, "hash_ids": %s}\n'

# each was a traceback, a silent misreading or runaway memory before (issue 37, items 13-15)
TRACES = {
    "5,000-digit integer": (TRACE_ROW % (0, "9" * 5000, "[1]"), "line 1: not JSON (a number too long to read)"),
    "100,000-deep nesting": ("[" * 100_000 + "]" * 100_000 + "\n", "line 1: not JSON (nested too deeply)"),
    "Infinity in the hashes": (TRACE_ROW % (0, 100, "[Infinity]"), "not JSON (Infinity is not a number JSON allows)"),
    "a length as a string": (
        TRACE_ROW % (0, '"36640"', "[1]"),
        "input_length = '36640': expected a whole number of tokens, not a string",
    ),
    "fractional hashes": (TRACE_ROW % (0, 1000, "[1.5, 2.7]"), "hash_ids: expected integers, got 1.5"),
    "a boolean timestamp": (TRACE_ROW % ("false", 100, "[1]"), "timestamp = False: expected a number, not a boolean"),
    "arrivals 1e15 ms apart": (
        TRACE_ROW % (0, 100, "[1]") + TRACE_ROW % ("1e15", 100, "[1]"),
        "line 2: arrives 1e+12 s after the first request, more than a year",
    ),
}


@pytest.mark.parametrize("case", list(TRACES))
def test_a_hostile_trace_is_one_line(cli: Any, tmp_path: Path, case: str) -> None:
    text, message = TRACES[case]
    path = tmp_path / "t.jsonl"
    path.write_text(text, encoding="utf-8")
    one_error_line(cli("trace", "import", str(path)), str(path), message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON: nested too deeply"),
        ('{"version": ' + "9" * 5000 + "}", "not valid JSON: a number too long to read"),
    ],
)
def test_a_hostile_baseline_is_one_line(cli: Any, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(text, encoding="utf-8")
    one_error_line(cli("gate", str(path)), str(path), message)


def test_a_5000_digit_integer_in_a_workload_is_one_line(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.replace("max_count: ", "max_count: " + "9" * 5000 + "0", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), str(path), "not valid YAML: a number too long to read")


def test_a_sweep_of_100000_points_is_refused_before_any_work(cli: Any) -> None:
    result = cli("sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--range", "0.5:8:100000")
    one_error_line(result, "--range '0.5:8:100000': NUM must be 1 to 1000")


def test_a_rate_of_1e_minus_300_is_refused_not_simulated_forever(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.replace("rate_rps: 4.0", "rate_rps: 1.0e-300", 1), encoding="utf-8")
    plan = str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")
    one_error_line(cli("simulate", plan, str(path)), "arrival.rate_rps = 1e-300", "greater than or equal to 0.000001")
    one_error_line(cli("evaluate", plan, "pdd-agent-64k", "--rate", "1e-300"), "--rate = 1e-300: must be above 0")


def test_a_link_planted_at_the_temporary_name_is_not_followed(
    cli: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary file had a name anyone could predict (`.<name>.<pid>.tmp`), opened with a plain
    open: a symbolic link planted there sent the export's script to a file outside --out, made it
    executable, and left the link renamed into the folder. Now the name is random and the file is
    created only where nothing is (the name made known here, to plant the link): one line, exit 2,
    the outside file as it was."""
    monkeypatch.setattr(secrets, "token_hex", lambda n: "known")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / f".schema.md.{os.getpid()}.known.tmp").symlink_to(outside)
    one_error_line(cli("schema", "--markdown", str(out / "schema.md")), "schema.md", "cannot write")  # type: ignore[operator]
    assert outside.read_text(encoding="utf-8") == "keep\n" and not (out / "schema.md").exists()


@pytest.mark.parametrize("flag", ["--out", "--outputs"])
def test_schema_refuses_a_folder_that_is_a_symbolic_link(cli: object, tmp_path: Path, flag: str) -> None:
    """`export --out` refused a symbolic link as its folder; `schema --out` and `--outputs` wrote
    through it into the folder it points at."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    one_error_line(cli("schema", flag, str(link)), flag, "symbolic link")  # type: ignore[operator]
    assert not list(elsewhere.iterdir())


def test_written_files_get_the_umask_mode_and_scripts_are_executable(cli: object, tmp_path: Path) -> None:
    """A file made through the temporary file has the mode a plain write gives (0o666 less the
    umask), and an export's scripts 0o755, set before the rename."""
    old = os.umask(0o022)
    try:
        result = cli(  # type: ignore[operator]
            "export",
            str(ROOT / "examples/plans/pdd-agent-64k-pdd.yaml"),
            "pdd-agent-64k",
            "--target",
            "sglang",
            "--out",
            str(tmp_path / "out"),
        )
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()}
    assert modes["README.md"] == 0o644 and modes["prefill-0.sh"] == 0o755, modes
    assert not [name for name in modes if name.endswith(".tmp")]


@pytest.mark.parametrize(("written", "shown"), [("0\\r0", "'0\\r0'"), ("\\e[2J", "'\\x1b[2J'")])
def test_control_characters_from_a_file_are_escaped_in_the_error_line(
    cli: Any, tmp_path: Path, written: str, shown: str
) -> None:
    """A source tag holding a carriage return split the error into two lines (found by
    tests/fuzz_inputs.py), and an escape sequence would reach the terminal: both are shown escaped."""
    text = (ROOT / "hardware_profiles" / "gpu-a.yaml").read_text(encoding="utf-8")
    old = 'scale_up_domain: {value: 8, source: "assumption:'
    assert old in text
    path = tmp_path / "gpu-a.yaml"
    path.write_text(text.replace(old, f'scale_up_domain: {{value: 8, source: "{written}", note: "'), encoding="utf-8")
    one_error_line(cli("hardware", "show", str(path)), f"interconnect.scale_up_domain cites source {shown}, which")
