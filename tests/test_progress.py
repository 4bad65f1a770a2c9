"""Long work shows progress on stderr, only on a terminal (issue 37, item 8): `optimize` run under
a pseudo-terminal writes its steps there while stdout keeps the clean JSON; without a terminal
stderr stays empty; and every slow command wraps its work in a progress display."""

from __future__ import annotations

import ast
import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pddplan.report import output
from pddplan.support import forking

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["optimize", "pdd-agent-64k", "-a", "pd-intra", "--no-verify", "--json"]
#: the commands the README calls slow (seconds to a minute), each with the CLI module defining it
SLOW = {
    "agreement": "studies",
    "paper": "studies",
    "gate": "planning",
    "optimize": "planning",
    "cache_plan": "traces",
    "accuracy": "calibration",
}


def run_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, what reached the terminal on stderr) of `pddplan ARGS`, stderr a pty."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pddplan", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**os.environ, "COLUMNS": "100"},
    )
    os.close(slave)
    assert process.stdout is not None
    out_fd = process.stdout.fileno()
    # Both read as they come: a command whose stdout fills the pipe would otherwise block on it
    # while this waited for the terminal to close.
    received: dict[int, list[bytes]] = {master: [], out_fd: []}
    reading = {master, out_fd}
    while reading:
        ready, _, _ = select.select(sorted(reading), [], [], 0.5)
        if not ready and process.poll() is not None:
            reading.discard(master)  # exited, and nothing more on the terminal
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                data = b""
            if data:
                received[fd].append(data)
            else:
                reading.discard(fd)
    process.wait(timeout=60)
    os.close(master)
    out = b"".join(received[out_fd]).decode()
    err = b"".join(received[master])
    return process.returncode, out, err.decode(errors="replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminals as Linux opens them")
def test_optimize_shows_its_steps_on_a_terminal_and_keeps_stdout_clean() -> None:
    code, out, err = run_on_a_terminal(ARGS)
    assert code == 0
    assert json.loads(out)["architectures"][0]["name"] == "pd-intra"
    assert "optimizing..." in err and "pd-intra: routing -, round 1" in err


def test_without_a_terminal_no_progress_is_written() -> None:
    done = subprocess.run([sys.executable, "-m", "pddplan", *ARGS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize("command", list(SLOW))
def test_every_slow_command_shows_progress(command: str) -> None:
    """Its CLI function opens `output.status` or `output.progress_bar` around its work."""
    path = ROOT / "pddplan" / "cli" / f"{SLOW[command]}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == command)
    calls = {
        node.func.attr
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert calls & {"status", "progress_bar"}, f"{command} shows no progress"


def test_the_progress_bar_on_a_terminal_leaves_forking_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar redraws on each step, with no refresh thread of its own: a bathtub or sweep shown on
    a terminal still runs its points on forked workers."""
    shown = io.StringIO()
    console = Console(file=shown, force_terminal=True, width=80)
    monkeypatch.setattr(output, "diagnostics", lambda: console)
    with output.progress_bar() as bar:
        task = bar.add_task("hit-rate sweep", total=2)
        assert forking.fork_is_safe()
        bar.update(task, completed=1, refresh=True)
    assert "hit-rate sweep" in shown.getvalue()
