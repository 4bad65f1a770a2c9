"""The three special functions the models need, from the standard library.

scipy.special would give the same values, but importing it pulls in scipy's array-API layer and
numpy.f2py (~100 ms), a third of what a user waits for `pddplan optimize` to start.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

_STANDARD = NormalDist()


def _inverse_cdf(p: float) -> float:
    if p <= 0.0:
        return -math.inf if p == 0.0 else math.nan
    if p >= 1.0:
        return math.inf if p == 1.0 else math.nan
    return _STANDARD.inv_cdf(p)


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


_INVERSE_CDF = np.frompyfunc(_inverse_cdf, 1, 1)
_CDF = np.frompyfunc(_cdf, 1, 1)


def norm_cdf(x: ArrayLike) -> np.ndarray:
    """Phi(x) = erfc(-x / sqrt(2)) / 2, the standard normal CDF, elementwise (0 at -inf, 1 at inf)."""
    return np.asarray(_CDF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def norm_ppf(p: ArrayLike) -> np.ndarray:
    """Phi^-1(p), the standard normal quantile, elementwise: -inf at 0, inf at 1, NaN outside [0, 1]
    (Wichura's AS241 algorithm, as `statistics.NormalDist.inv_cdf`)."""
    return np.asarray(_INVERSE_CDF(np.asarray(p, dtype=np.float64)), dtype=np.float64)


def log_factorials(top: int) -> np.ndarray:
    """log(k!) = lgamma(k + 1) for k = 0..top."""
    return np.array([math.lgamma(k + 1.0) for k in range(top + 1)], dtype=np.float64)
