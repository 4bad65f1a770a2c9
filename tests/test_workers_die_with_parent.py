"""Forked workers die with their parent, even when it is killed by SIGKILL (issue 37, item 16)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pddplan.support.forking import die_with_parent

# A parent that forks one pool worker the way `optimize_all` does, and waits.
PARENT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from pddplan.support.forking import die_with_parent

def work(path):
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(120)

context = multiprocessing.get_context("fork")
with ProcessPoolExecutor(1, context, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
    pool.submit(work, sys.argv[1])
    time.sleep(120)
"""


# The same under the CLI's SIGTERM handling (an exit through Python's unwinding), with `forked_pool`.
TERMINATED = """
import os, signal, sys, time
from pddplan.support.forking import forked_pool

def work(path):
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(120)

signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
with forked_pool(1) as pool:
    pool.submit(work, sys.argv[1]).result()
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_pool_worker_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    parent, worker = _started_worker(PARENT, tmp_path / "worker.pid")
    try:
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_until_gone(worker, "the worker outlived its SIGKILLed parent")
    finally:
        parent.kill()


def _started_worker(script: str, marker: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A parent running `script` and the pid of the pool worker it wrote to `marker`."""
    parent = subprocess.Popen([sys.executable, "-c", script, str(marker)])
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.05)
    return parent, int(marker.read_text())


def _wait_until_gone(pid: int, message: str) -> None:
    """Fails with `message` unless process `pid` is gone within 10 s."""
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc tells whether the worker runs")
def test_sigterm_stops_the_parent_and_its_running_worker_at_once(tmp_path: Path) -> None:
    """Before, the pool's shutdown waited for the running task: a SIGTERMed optimize ran on."""
    parent, worker = _started_worker(TERMINATED, tmp_path / "worker.pid")
    try:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=10) == 128 + signal.SIGTERM
        _wait_until_gone(worker, "the worker outlived its parent's SIGTERM")
    finally:
        parent.kill()


def test_a_worker_whose_parent_is_already_gone_exits(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:  # the child: told its parent is someone else, as if the real one had died
        die_with_parent(os.getppid() + 1_000_000)
        os._exit(0)  # never reached
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
