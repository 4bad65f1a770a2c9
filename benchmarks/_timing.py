"""Shared helpers of the benchmark scripts: repeat a call, report median and spread."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def repeat(call: Callable[[], object], times: int) -> list[float]:
    """Wall seconds of `times` runs of `call`."""
    out = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def run_cli(*args: str) -> None:
    """Run `python -m pddplan ARGS` in a subprocess (what a user waits for), output discarded."""
    subprocess.run(
        [sys.executable, "-m", "pddplan", *args],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def report(name: str, seconds: list[float], target_s: float | None) -> bool:
    """Print one line: median, min, max against the target (None: no target, just the figure);
    return whether the median meets it."""
    median = statistics.median(seconds)
    ok = target_s is None or median <= target_s
    verdict = "" if target_s is None else f"  target <= {target_s:g} s  {'OK' if ok else 'MISSED'}"
    print(
        f"{name:<58} median {median:8.3f} s  (min {min(seconds):.3f}, max {max(seconds):.3f}, n={len(seconds)})"
        + verdict
    )
    return ok
