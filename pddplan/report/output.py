"""Where output goes: people read stderr, machines read stdout (`--json`) and nothing else."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from rich.console import Console


def human() -> Console:
    """A console on stderr for tables, summaries and progress.

    When stderr is not a terminal (a pipe, a CI log), tables get 160 columns instead of rich's 80,
    unless COLUMNS says otherwise.
    """
    console = Console(stderr=True, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=True, highlight=False, width=160)
    return console


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


def emit_json(data: Any) -> None:
    """Write `data` as JSON to stdout, and nothing else."""
    sys.stdout.write(to_json(data) + "\n")
    sys.stdout.flush()
