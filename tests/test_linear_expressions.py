"""`weighted_sum` builds the expression `pulp.lpSum(a * x)` builds, in one pass, on PuLP 3 and 4."""

from __future__ import annotations

import pulp
import pytest

from pddplan.optimize.linear import plain_sum, weighted_sum
from pddplan.optimize.solver import SolverOptions, solve


def test_a_weighted_sum_adds_repeated_variables_and_keeps_the_constant() -> None:
    problem = pulp.LpProblem("terms")  # PuLP 4's variables live as long as their problem
    x, y = problem.add_variable("x"), problem.add_variable("y")
    expression = weighted_sum([(x, 2.0), (y, 0.5), (x, 3.0)], constant=4.0)
    # 5 x + 0.5 y + 4 at x = 1, y = 10: 5 + 5 + 4
    x.setInitialValue(1.0)
    y.setInitialValue(10.0)
    assert pulp.value(expression) == pytest.approx(14.0, rel=1e-12)
    assert {variable.name: coefficient for variable, coefficient in expression.items()} == {"x": 5.0, "y": 0.5}


def test_a_zero_coefficient_leaves_its_variable_out_as_lpsum_does() -> None:
    problem = pulp.LpProblem("terms")
    x, y = problem.add_variable("x"), problem.add_variable("y")
    ours = weighted_sum([(x, 0.0), (y, 1.5)])
    theirs = pulp.lpSum([0.0 * x, 1.5 * y])
    assert [v.name for v, _ in ours.items()] == [v.name for v, _ in theirs.items()] == ["y"]


def test_a_plain_sum_is_a_constraint_pulp_solves() -> None:
    problem = pulp.LpProblem("one-of-three", pulp.LpMaximize)
    picks = [problem.add_variable(f"z{i}", cat="Binary") for i in range(3)]
    problem += weighted_sum(zip(picks, [1.0, 3.0, 2.0], strict=True))
    problem += plain_sum(picks) == 1
    # through pddplan's solver: HiGHS keeps one thread count per process, and its is 1
    assert solve(problem, SolverOptions()) == "optimal"
    assert [round(z.value()) for z in picks] == [0, 1, 0]
