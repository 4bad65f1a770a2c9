"""Where output goes: results on stdout (tables for people, or `--json` for machines, nothing else);
progress, notices, warnings and errors on stderr, so results can be piped, grepped and redirected."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from rich.console import Console


def results() -> Console:
    """A console on stdout for the result tables, charts and summaries people read.

    When stdout is not a terminal (a pipe, a file, a CI log), tables get 160 columns instead of
    rich's 80, unless COLUMNS says otherwise.
    """
    return _console(stderr=False)


def diagnostics() -> Console:
    """A console on stderr for progress, notices ("wrote FILE") and warnings."""
    return _console(stderr=True)


def progress_bar() -> Any:
    """A transient progress bar on stderr, shown only when stderr is a terminal (a CI log or a
    pipe gets no bar and no stray blank line)."""
    console = diagnostics()
    if not console.is_terminal:  # not even a disabled rich Progress: older rich prints a newline
        return _NoProgress()
    from rich.progress import Progress

    return Progress(console=console, transient=True)


class _NoProgress:
    """The part of rich's Progress the commands use, doing nothing."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        return 0

    def update(self, task: int, completed: float | None = None) -> None:
        return None


def _console(stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, highlight=False, width=160)
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
