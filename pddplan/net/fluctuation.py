"""Random variation of a WAN line's available capacity.

The available fraction of nominal capacity is
    f(t) = clip(1 + cv * X(t), min_fraction, 1),
X a stationary Ornstein-Uhlenbeck process (mean 0, standard deviation 1, correlation time tau),
sampled every `step_s` as the AR(1) recursion X_{k+1} = a X_k + sqrt(1 - a^2) e_k, a = exp(-step/tau),
and held constant in between. Or f comes from a measured trace (`time_s,capacity_fraction`),
repeated. The closed-form evaluator uses the stationary distribution of f; the simulator a path.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from pddplan.errors import InputError
from pddplan.specs.workload import Fluctuation
from pddplan.support.frozen import read_only
from pddplan.support.loading import read_text
from pddplan.support.special import norm_ppf

SUPPORT_POINTS = 8


@dataclass(frozen=True, eq=False)
class CapacityTrace:
    """A measured capacity trace of a line: the available fraction from each time on (repeated)."""

    times_s: np.ndarray
    fractions: np.ndarray


def read_trace(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(times_s, fractions) of a capacity trace CSV (`time_s,capacity_fraction`), validated; a
    regular file only, finite numbers only."""
    if not path.exists():
        raise InputError(f"{path}: capacity trace file not found")
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    if not rows or not {"time_s", "capacity_fraction"} <= set(rows[0]):
        raise InputError(f"{path}: expected CSV columns time_s,capacity_fraction")
    times: list[float] = []
    fractions: list[float] = []
    for number, row in enumerate(rows, start=2):
        try:
            t, f = float(row["time_s"]), float(row["capacity_fraction"])
        except (ValueError, TypeError):
            raise InputError(f"{path}: line {number}: not a number: {row}") from None
        if not math.isfinite(t):
            raise InputError(f"{path}: line {number}: time_s = {t}: expected a finite number")
        if not 0 < f <= 1:
            raise InputError(f"{path}: line {number}: capacity_fraction = {f}: expected 0 < f <= 1")
        if times and t <= times[-1]:
            raise InputError(f"{path}: line {number}: time_s = {t}: times must increase")
        times.append(t)
        fractions.append(f)
    return np.array(times), np.array(fractions)


def stationary_support(spec: Fluctuation, trace: CapacityTrace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(capacity fractions, probabilities) of the stationary distribution, for closed forms; a
    `kind: trace` fluctuation needs its loaded `trace` (each fraction weighted by how long it holds)."""
    if spec.kind == "none" or (spec.kind == "ou" and spec.cv == 0):
        return np.array([1.0]), np.array([1.0])
    if spec.kind == "trace":
        assert trace is not None, "a trace fluctuation needs its loaded trace (see pddplan.inputs.input_set)"
        times, fractions = trace.times_s, trace.fractions
        if len(times) == 1:
            return fractions, np.array([1.0])
        durations = np.diff(times, append=times[-1] + (times[-1] - times[0]) / max(len(times) - 1, 1))
        return fractions, durations / durations.sum()
    return _ou_support(spec.cv, spec.min_fraction)


@lru_cache(maxsize=64)
def _ou_support(cv: float, min_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The OU fluctuation's stationary support: f at the middles of SUPPORT_POINTS equal-probability
    slices of the normal, clip(1 + cv z, min_fraction, 1) (read-only arrays, kept by (cv, min))."""
    probs = (np.arange(SUPPORT_POINTS) + 0.5) / SUPPORT_POINTS
    fractions, weights = read_only(
        np.clip(1.0 + cv * norm_ppf(probs), min_fraction, 1.0), np.full(SUPPORT_POINTS, 1.0 / SUPPORT_POINTS)
    )
    return fractions, weights


def mean_fraction(spec: Fluctuation, trace: CapacityTrace | None = None) -> float:
    """Long-run mean available fraction E[f]."""
    fractions, probs = stationary_support(spec, trace)
    return float(fractions @ probs)


#: normals a path draws at a time: one numpy call instead of one per step (a simulation of
#: 100,000 requests steps its line 25,000 times)
NORMALS_DRAWN = 1024


class CapacityPath:
    """A sampled path of f(t), piecewise constant on steps, drawn lazily from a seeded generator.

    It must be `rng`'s last user: it draws its normals NORMALS_DRAWN at a time, ahead of use (the
    same values, in the same order, as one draw per step; a later user of `rng` would see them
    gone)."""

    def __init__(self, spec: Fluctuation, rng: np.random.Generator, trace: CapacityTrace | None = None) -> None:
        self.spec = spec
        self.rng = rng
        self._normals: list[float] = []
        self._x = self._normal() if spec.kind == "ou" else 0.0
        self._last_t: float | None = None
        self._trace: tuple[np.ndarray, np.ndarray] | None = None
        if spec.kind == "trace":
            assert trace is not None, "a trace fluctuation needs its loaded trace (see pddplan.inputs.input_set)"
            self._trace = (trace.times_s, trace.fractions)
        single_row = self._trace is not None and len(self._trace[0]) == 1
        self.constant = spec.kind == "none" or (spec.kind == "ou" and spec.cv == 0) or single_row

    def _normal(self) -> float:
        """The generator's next standard normal (drawn with the next NORMALS_DRAWN - 1 when none is left)."""
        if not self._normals:
            self._normals = self.rng.standard_normal(NORMALS_DRAWN).tolist()[::-1]
        return self._normals.pop()

    def next_step(self, t: float) -> tuple[float, float]:
        """(fraction holding from `t`, time of the next change)."""
        if self.constant:
            return (float(self._trace[1][0]) if self._trace is not None else 1.0), math.inf
        if self._trace is not None:
            times, fractions = self._trace
            period = times[-1] - times[0] + (times[-1] - times[0]) / max(len(times) - 1, 1)
            # `local` can land a rounding error short of a knot; within `eps` of it counts as on it,
            # and every step moves forward by at least `eps`, so a simulation never stands still.
            eps = 1e-9 * period
            local = (t - times[0]) % period + times[0]
            if local > times[0] + period - eps:
                local = float(times[0])
            index = int(np.searchsorted(times, local + eps, side="right") - 1)
            following = times[index + 1] if index + 1 < len(times) else times[0] + period
            return float(fractions[index]), t + max(float(following - local), eps)
        if self._last_t is not None:
            # Exact AR(1) jump over the steps since the last draw: a^k X + sqrt(1 - a^2k) e.
            steps = max((t - self._last_t) / self.spec.step_s, 1.0)
            a_k = math.exp(-steps * self.spec.step_s / self.spec.correlation_s)
            self._x = a_k * self._x + math.sqrt(1.0 - a_k**2) * self._normal()
        self._last_t = t
        fraction = min(max(1.0 + self.spec.cv * self._x, self.spec.min_fraction), 1.0)
        return fraction, t + self.spec.step_s


class SteppedPath:
    """A capacity path whose fraction is multiplied by `share` from `at_s` on: a line of a pool
    failing at `at_s` (share = the capacity left / the pool's), for a transient simulation."""

    def __init__(self, path: CapacityPath, at_s: float, share: float) -> None:
        self.path = path
        self.at_s = at_s
        self.share = share

    @property
    def constant(self) -> bool:
        return False  # it changes at at_s

    def next_step(self, t: float) -> tuple[float, float]:
        """(fraction holding from `t`, time of the next change), the step at `at_s` included."""
        fraction, following = self.path.next_step(t)
        if t < self.at_s:
            return fraction, min(following, self.at_s)
        return fraction * self.share, following
