"""Run PuLP with HiGHS (default, in-process) or CBC, keeping stdout clean for `--json`.

HiGHS prints a banner from C++ straight to file descriptor 1 when its first `Highs()` object is
built, whatever `msg=False` says; Python-level redirection cannot catch it. During a solve, fd 1
is therefore pointed at the null device and restored afterwards (with `msg=False` nothing else is
printed there).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import pulp

from pddplan.errors import InputError
from pddplan.support.limits import check_time_limit

SolverName = Literal["highs", "cbc"]


@dataclass(frozen=True)
class SolverOptions:
    """Which solver, and how long / how exact."""

    name: SolverName = "highs"
    time_limit_s: float | None = None
    mip_gap: float = 1e-6

    def __post_init__(self) -> None:
        if self.name not in ("highs", "cbc"):
            raise InputError(f"--solver = {self.name!r}: expected highs or cbc")
        if self.time_limit_s is not None:
            check_time_limit(self.time_limit_s)
        if not 0 <= self.mip_gap < 1:
            raise InputError(f"--mip-gap = {self.mip_gap}: must be in [0, 1)")


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Point file descriptor 1 at the null device for the duration (C-level output included)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real fd 1 (e.g. inside a test runner): nothing to protect
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def make_solver(options: SolverOptions) -> pulp.LpSolver:
    """A configured PuLP solver; InputError when the requested one is not installed."""
    if options.name == "highs":
        # HiGHS's default integer-feasibility tolerance (1e-6) lets a served rate exceed a capacity
        # by 1e-6 req/s; plans are compared to capacities within 1e-9.
        solver = pulp.HiGHS(
            msg=False,
            timeLimit=options.time_limit_s,
            gapRel=options.mip_gap,
            threads=1,
            mip_feasibility_tolerance=1e-9,
        )
    elif options.name == "cbc":
        solver = pulp.COIN_CMD(msg=False, timeLimit=options.time_limit_s, gapRel=options.mip_gap)
        if not solver.available() and hasattr(pulp, "PULP_CBC_CMD"):
            # PuLP 3.x bundles CBC but warns that the wrapper goes away in 4.0.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=options.time_limit_s, gapRel=options.mip_gap)
    else:
        raise InputError(f"--solver = {options.name!r}: expected highs or cbc")
    if not solver.available():
        raise InputError(f"solver {options.name} is not available on this machine; use --solver highs")
    return solver


def solve(model: pulp.LpProblem, options: SolverOptions) -> str:
    """Solve in place; return 'optimal', 'feasible' (stopped early with a solution) or 'infeasible'."""
    solver = make_solver(options)
    with quiet_stdout():
        result = model.solve(solver)
    if hasattr(model, "sol_status"):  # PuLP 3
        if model.sol_status == pulp.LpSolutionOptimal:
            return "optimal"
        if model.sol_status == pulp.LpSolutionIntegerFeasible:
            return "feasible"
        return "infeasible"
    # PuLP 4 (on Python 3.12+): solve() returns a result with the status and whether it has a solution
    if not result.has_solution:
        return "infeasible"
    return "optimal" if result.status == pulp.LpSolveStatus.Optimal else "feasible"
