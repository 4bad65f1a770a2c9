"""Shared fixtures: the repository root, a CLI runner, and a helper that runs pddplan commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from pddplan.cli import app
from pddplan.optimize import parallel

ROOT = Path(__file__).resolve().parent.parent

# Property tests explore new random examples on a developer's machine (they found a link that
# finished flows up to 1e-6 of its byte clock early), and replay a fixed sequence in CI (CI=true),
# so a merge is judged on the same examples every time.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("ci" if os.environ.get("CI") else "explore")


# The test harness's own threads (pytest-xdist's worker talks to its controller on a native
# thread), counted before numpy loads. The optimizer forks only when nothing but the main thread
# runs; the harness's threads are discounted so that tests exercise the forked workers and can
# still see a thread pddplan itself started (a BLAS pool, say).
HARNESS_THREADS = parallel.threads_in_process()


@pytest.fixture(autouse=True)
def _discount_harness_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    real = parallel.threads_in_process
    monkeypatch.setattr(parallel, "threads_in_process", lambda: real() - (HARNESS_THREADS - 1))


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository root (workloads/, hardware_profiles/, examples/ live here)."""
    return ROOT


@pytest.fixture()
def cli() -> Any:
    """Run `pddplan ARGS...`; returns typer's Result with separate .stdout and .stderr."""
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=False)

    return run
