"""Shared fixtures: the repository root, a CLI runner, and a helper that runs pddplan commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from typer.testing import CliRunner
from typer_once import install_command_cache

from pddplan.cli import app_for
from pddplan.support import forking

ROOT = Path(__file__).resolve().parent.parent

#: Tests that run whole commands for two seconds to a minute (the fuzz, the gate, the paper, the
#: agreement check, distributed sweeps, bathtubs over many points, a browser), marked `slow`. The
#: README's test command runs them; CI's second and third runs of the suite (oldest pins, newest
#: CPython) leave them out with `-m "not slow"`, which keeps CI near its time budget while the rest
#: of the suite still covers both ends of the version ranges (each command still runs there, in a
#: smaller test of its own).
SLOW_TESTS = (
    "test_fuzz_inputs.py::",
    "test_paper.py::",
    "test_output_schemas.py::test_json_output_matches_its_schema[gate]",
    "test_output_schemas.py::test_json_output_matches_its_schema[cache-plan]",
    "test_crossval.py::test_five_fold_cross_validation_meets_the_engine_step_targets_within_five_points",
    "test_terminal_width.py::test_output_fits_the_terminal_without_cutting_anything[gate ",
    "test_terminal_width.py::test_output_fits_the_terminal_without_cutting_anything[optimize pdd-agent-64k-day",
    "test_terminal_width.py::test_output_fits_the_terminal_without_cutting_anything[optimize benchmarks/fleet-10k",
    "test_sweep.py::test_ray_",
    "test_sweep.py::test_dask_",
    "test_sweep.py::test_a_bathtub_on_a_cluster_",
    "test_sweep.py::test_an_unreachable_scheduler_",
    "test_optimize_search.py::test_architectures_optimized_side_by_side_give_the_same_report",
    "test_robust.py::test_the_day_workload_robustly",
    "test_robustness.py::test_optimize_robustness_json",
    "test_plans_are_minimal.py::",
    "test_readme.py::test_readme_blocks_match_the_tool",
    "test_readme_walkthrough.py::",
    "test_agreement.py::test_agreement_on_the_workloads_named_matches_its_schema",
    "test_bathtub.py::test_json_has_points_and_findings",
    "test_bathtub.py::test_dips_sit_within_one_grid_step_of_the_arithmetic",
    "test_bathtub.py::test_predicted_dips_are_the_chunk_arithmetic",
    "test_bathtub_trace.py::test_bathtub_with_a_trace",
    "test_request_mix.py::test_a_trace_built_workload_optimizes_end_to_end_and_keeps_the_correlation",
    "test_optimize_search.py::test_budget_mode_never_serves_nothing",
    "test_drc.py::test_the_optimizer_chooses_the_radix_cache_retention",
    "test_colocated_relay.py::test_auto_is_no_worse_than_either_placement",
    "test_plan_report.py::test_the_report_renders_in_headless_chromium_without_console_errors",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.removeprefix("tests/").startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)


# typer's CliRunner builds the click command tree once per run, not on every invoke (typer_once.py)
install_command_cache()


# Property tests explore new random examples on a developer's machine (they found a link that
# finished flows up to 1e-6 of its byte clock early), and replay a fixed sequence in CI (CI=true),
# so a merge is judged on the same examples every time.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("ci" if os.environ.get("CI") else "explore")


# The optimizer forks only when nothing but the main thread runs. A test starts beside threads
# that are not its own (pytest-xdist's worker talks to its controller on a native thread; an
# earlier test's dask or ray runtime may linger), so each test counts only the threads beyond
# those it started with: tests exercise the forked workers and still see a thread pddplan itself
# starts. (Lingering Python threads still count: `fork_is_safe` also asks `threading`.)
@pytest.fixture(autouse=True)
def _discount_threads_already_running(monkeypatch: pytest.MonkeyPatch) -> None:
    real = forking.threads_in_process
    already = real()
    monkeypatch.setattr(forking, "threads_in_process", lambda: real() - (already - 1))


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository root (workloads/, hardware_profiles/, examples/ live here)."""
    return ROOT


@pytest.fixture()
def cli() -> Any:
    """Run `pddplan ARGS...`; returns typer's Result with separate .stdout and .stderr."""
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app_for(args), list(args), catch_exceptions=False)  # the app `main` runs

    return run


@pytest.fixture
def fail_mid_write(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`fail_mid_write(error)`: the atomic writes after it (`pddplan.support.loading`) land half
    their bytes in the temporary file, then raise `error` (a full disk, Ctrl-C); `monkeypatch.undo()`
    ends it."""

    def arm(error: BaseException) -> None:
        real_fdopen = os.fdopen

        class HalfThenFail:
            def __init__(self, fd: int, *args: Any) -> None:
                self.file = real_fdopen(fd, *args)

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: object) -> None:
                self.file.close()

            def write(self, data: bytes) -> int:
                self.file.write(data[: len(data) // 2])
                raise error

        monkeypatch.setattr(os, "fdopen", HalfThenFail)

    return arm
