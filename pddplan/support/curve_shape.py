"""The shape of a curve, in words that follow its data: rising, falling, flat, a hump, a valley,
a sawtooth, and the dips along it (`bathtub`'s findings name what the curve does, not what the
article says it should).

A step counts as a move when it changes the value by more than `FLAT_STEP` (relative); a turn is
a change of direction between two moves. With the ends e0 and e1 and the interior max M and min m:
    sawtooth   at least SAWTOOTH_TURNS turns;
    hump       M > max(e0, e1) (1 + EXTREMUM) and m >= min(e0, e1) (1 - EXTREMUM);
    valley     m < min(e0, e1) (1 - EXTREMUM) and M <= max(e0, e1) (1 + EXTREMUM);
    hump and valley  both;
    flat       max / min - 1 <= EXTREMUM over the whole curve;
    rising / falling  otherwise, by e1 against e0 ("with dips" when local minima interrupt it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLAT_STEP = 0.002
EXTREMUM = 0.05
SAWTOOTH_TURNS = 4
DIP = 0.005  # a local minimum at least 0.5% below both neighbours


@dataclass(frozen=True)
class Shape:
    kind: str  # rising, falling, flat, hump, valley, hump and valley, sawtooth, too few points
    extremum_x: float | None  # the hump's top or the valley's bottom
    dips_x: tuple[float, ...]
    words: str


def local_minima(values: np.ndarray, drop: float = DIP) -> list[int]:
    """Indices of interior points at least `drop` (relative) below both neighbours."""
    out = []
    for i in range(1, len(values) - 1):
        left, mid, right = values[i - 1], values[i], values[i + 1]
        finite = np.isfinite(left) and np.isfinite(mid) and np.isfinite(right)
        if finite and mid < left * (1 - drop) and mid < right * (1 - drop):
            out.append(i)
    return out


def turns(values: np.ndarray) -> int:
    """Changes of direction between successive moves larger than FLAT_STEP (relative)."""
    steps = np.diff(values) / np.maximum(np.abs(values[:-1]), 1e-300)
    signs = np.sign(np.where(np.abs(steps) > FLAT_STEP, steps, 0.0))
    moves = signs[signs != 0]
    return int((moves[1:] != moves[:-1]).sum()) if len(moves) > 1 else 0


def curve_shape(x: np.ndarray, values: np.ndarray, x_label: str = "{:.0%}", fmt: str = "{:.3g}") -> Shape:
    """The shape of `values` over `x` (NaN points left out), by the module docstring's rules."""
    finite = np.isfinite(values)
    x, y = np.asarray(x, dtype=np.float64)[finite], np.asarray(values, dtype=np.float64)[finite]
    if len(y) < 3:
        return Shape("too few points", None, (), f"only {len(y)} point(s) with a plan: no shape to name")

    def at(i: int) -> str:
        return f"{fmt.format(y[i])} at {x_label.format(x[i])}"

    minima = local_minima(y)
    ends_low, ends_high = min(y[0], y[-1]), max(y[0], y[-1])
    top, bottom = int(np.argmax(y[1:-1])) + 1, int(np.argmin(y[1:-1])) + 1
    hump = y[top] > ends_high * (1 + EXTREMUM)
    valley = y[bottom] < ends_low * (1 - EXTREMUM)
    dips = tuple(float(x[i]) for i in minima if not (valley and i == bottom))  # a valley's bottom is no dip
    dip_words = f"; dips at {', '.join(x_label.format(d) for d in dips)}" if dips else ""
    if turns(y) >= SAWTOOTH_TURNS and len(dips) >= 2:
        trend = "rising" if y[-1] > y[0] else "falling"
        return Shape("sawtooth", None, dips, f"{trend} in a sawtooth, {at(0)} to {at(len(y) - 1)}{dip_words}")
    if hump and valley:
        first, second = sorted((top, bottom))
        words = f"{at(0)}, {'up' if first == top else 'down'} to {at(first)}, then {at(second)}, {at(len(y) - 1)}"
        return Shape("hump and valley", float(x[top]), dips, words + dip_words)
    if hump:
        return Shape("hump", float(x[top]), dips, f"a hump: {at(0)}, {at(top)}, {at(len(y) - 1)}{dip_words}")
    if valley:
        return Shape("valley", float(x[bottom]), dips, f"a valley: {at(0)}, {at(bottom)}, {at(len(y) - 1)}{dip_words}")
    if y.max() <= y.min() * (1 + EXTREMUM):
        return Shape("flat", None, dips, f"flat within {EXTREMUM:.0%}: {at(0)} to {at(len(y) - 1)}{dip_words}")
    kind = "rising" if y[-1] > y[0] else "falling"
    return Shape(kind, None, dips, f"{kind} from {at(0)} to {at(len(y) - 1)}{' with' + dip_words[1:] if dips else ''}")
