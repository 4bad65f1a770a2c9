"""Running a script of `benchmarks/` as a developer does, from the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def script_output(name: str, *args: str) -> str:
    """`python benchmarks/NAME ARGS`'s stdout, once it exited 0 (within two minutes)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
