"""Shared fixtures: the repository root, a CLI runner, and a helper that runs pddplan commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pddplan.cli import app

ROOT = Path(__file__).resolve().parent.parent


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
