"""Linear expressions for the integer program, built in one pass.

`pulp.lpSum(a * x for ...)` builds an expression for every term and then adds them one at a time.
A program has thousands of prefill choices z(c, n) (kind x pool size), and several constraints and
the cost sum over all of them, so on the shipped scenario that arithmetic took about a fifth of
PDD's search. `weighted_sum` gathers the coefficients in a dict and builds each expression once,
through the constructor each supported PuLP major version has: 3.x takes the dict itself
(`LpAffineExpression(dict, constant)`), 4.x (expressions kept in Rust) `LpAffineExpression.from_dict`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pulp

# PuLP 4.x; None on 3.x, whose constructor takes the dict
_FROM_DICT = getattr(pulp.LpAffineExpression, "from_dict", None)


def weighted_sum(terms: Iterable[tuple[pulp.LpVariable, float]], constant: float = 0.0) -> Any:
    """sum_i a_i x_i + constant, as `pulp.lpSum(a_i * x_i) + constant` gives it: a variable named
    twice gets the sum of its coefficients, and a zero coefficient leaves the variable out."""
    coefficients: dict[pulp.LpVariable, float] = {}
    for variable, coefficient in terms:
        if coefficient != 0:
            coefficients[variable] = coefficients.get(variable, 0.0) + float(coefficient)
    if _FROM_DICT is not None:
        return _FROM_DICT(coefficients, float(constant))
    return pulp.LpAffineExpression(coefficients, float(constant))


def plain_sum(variables: Iterable[pulp.LpVariable]) -> Any:
    """sum_i x_i, every coefficient 1."""
    return weighted_sum((variable, 1.0) for variable in variables)
