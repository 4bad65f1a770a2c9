"""`pddplan.support.kept.kept_by_identity`: results kept for the very same object, not an equal one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from pddplan.support.kept import kept_by_identity


@dataclass(frozen=True)
class _Box:
    size: float


def _counted() -> tuple[list[float], Callable[..., np.ndarray]]:
    calls: list[float] = []

    @kept_by_identity(2)
    def doubled(box: _Box, scale: float = 1.0) -> np.ndarray:
        calls.append(box.size)
        return np.array([2.0 * box.size * scale])

    return calls, doubled


def test_the_same_object_is_computed_once_an_equal_one_again() -> None:
    calls, doubled = _counted()
    box = _Box(3.0)
    first = doubled(box)
    assert doubled(box) is first and calls == [3.0]
    assert doubled(_Box(3.0)) is not first and calls == [3.0, 3.0]
    assert doubled(box, 2.0)[0] == 12.0 and calls == [3.0, 3.0, 3.0]


def test_the_results_are_read_only_and_only_the_last_are_kept() -> None:
    calls, doubled = _counted()
    a, b, c = _Box(1.0), _Box(2.0), _Box(3.0)
    with pytest.raises(ValueError):
        doubled(a)[0] = 5.0
    doubled(b)
    doubled(c)  # a is the least recent of three: dropped
    assert calls == [1.0, 2.0, 3.0]
    doubled(c)
    doubled(a)
    assert calls == [1.0, 2.0, 3.0, 1.0]
