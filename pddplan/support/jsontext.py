"""JSON text as pddplan writes it everywhere (`--json`, baselines): NaN and infinities as null,
numpy scalars as numbers, keys in their logical order."""

from __future__ import annotations

import json
import math
from typing import Any


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(data: Any) -> str:
    """Deterministic JSON text: sorted keys are not used, so documents keep their logical order."""
    return json.dumps(_clean(data), indent=2, allow_nan=False)
