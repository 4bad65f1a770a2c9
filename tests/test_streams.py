"""What happens at the ends of the pipe: usage errors as one line, a full disk (/dev/full, Linux),
a reader that goes away, and a SIGTERM in the middle of a write. These run `python -m pddplan` in a
subprocess, since CliRunner captures the streams and cannot fill a disk or close a pipe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_results import one_error_line

from pddplan.cli import app


def pddplan(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pddplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs
    )


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["optimize", "--bogus"], ["No such option: --bogus", "(see pddplan optimize --help)"]),
        (["optimize"], ["Missing argument", "(see pddplan optimize --help)"]),
        (["--bogus"], ["No such option: --bogus", "(see pddplan --help)"]),
        (["bogus"], ["No such command 'bogus'", "(see pddplan --help)"]),
        (["simulate", "pdd-agent-64k", "--requests", "abc"], ["'--requests'", "(see pddplan simulate --help)"]),
        (["hardware", "show"], ["Missing argument", "(see pddplan hardware show --help)"]),
    ],
)
def test_usage_errors_are_one_line(args: list[str], fragments: list[str]) -> None:
    from typer.testing import CliRunner

    one_error_line(CliRunner().invoke(app, args, prog_name="pddplan"), *fragments)


def test_a_bare_group_still_shows_its_help() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["hardware"])
    assert "Browse the built-in hardware profiles." in result.stdout + result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "2000", "--json"],
        ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "2000"],
        ["schema", "workload"],
    ],
)
def test_a_full_disk_on_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "pddplan", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "error: standard output: cannot write: No space left on device\n"


def test_schema_out_to_a_device_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", "schema", "--out", "/dev/full"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    expected = "error: --out /dev/full: is not a folder (a file or a device); give a new or existing folder\n"
    assert proc.stderr == expected


@pytest.mark.parametrize("args", [["schema", "workload"], ["models", "list", "--json"], ["optimize", "--help"]])
def test_a_reader_that_goes_away_ends_the_run_quietly_with_141(args: list[str]) -> None:
    proc = pddplan(*args)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -c 0`: every write to stdout now fails with EPIPE
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert err == b""


def test_sigterm_during_a_run_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A SIGTERM unwinds like Ctrl-C: exit 143, and the temporary file beside the output is removed."""
    target = tmp_path / "requests.csv"
    plan = Path(__file__).parent.parent / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
    proc = pddplan("simulate", str(plan), "pdd-agent-64k", "--requests", "300000", "--per-request", str(target))
    time.sleep(3.0)  # inside the simulation (it takes several seconds), before or while writing
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert not target.exists() or os.path.getsize(target) > 0


def test_quiet_drops_notices_but_not_errors(cli: Any, tmp_path: Path) -> None:
    """`pddplan -q` leaves stderr empty on success (no "wrote" notices) and still says what failed."""
    result = cli("-q", "schema", "--out", str(tmp_path))
    assert result.exit_code == 0 and result.stderr == ""
    assert len(list(tmp_path.glob("*.schema.json"))) == 5
    loud = cli("schema", "--out", str(tmp_path))
    assert loud.stderr.count("wrote ") == 5
    failed = cli("-q", "optimize", "no-such-workload")
    assert failed.exit_code == 2 and failed.stderr.startswith("error: unknown workload")


@pytest.mark.parametrize(
    ("args", "files"),
    [
        (("bathtub", "pdd-agent-64k", "--points", "3", "-j", "1"), ("--csv", "b.csv", "--html", "b.html")),
        (("sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "4", "-j", "1"), ("--csv", "s.csv")),
    ],
)
def test_every_file_written_is_noticed(cli: Any, tmp_path: Path, args: tuple[str, ...], files: tuple[str, ...]) -> None:
    """bathtub's and sweep's --csv, --html, --png, --svg (and gate's --markdown) were written
    without the `wrote FILE` notice every other command gives."""
    paths = [str(tmp_path / f) if not f.startswith("--") else f for f in files]
    result = cli(*args, *paths)
    assert result.exit_code == 0, result.stderr
    for path in paths[1::2]:
        assert f"wrote {path}\n" in result.stderr and Path(path).stat().st_size > 0
