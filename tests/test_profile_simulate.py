"""benchmarks/profile_simulate.py reads the simulator's internals (its two loops, their handlers):
a small run keeps it working as the engine changes, and its event counts add up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_profile_script_splits_a_run_into_phases_and_event_kinds() -> None:
    requests = 500
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "profile_simulate.py"), "--requests", str(requests)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for phase in ("draw requests, caches, prefill pool", "main loop", "main decoders' loop", "results table"):
        assert re.search(rf"^{re.escape(phase)}\s+\d+\.\d{{3}}$", out, re.MULTILINE), phase
    counts = {
        row: int(count.replace(",", ""))
        for row, count in re.findall(r"^((?:main|decoders): [A-Za-z_ ]+?)\s+([\d,]+)\s", out, re.MULTILINE)
    }
    # every request's prefill completes once (PDD keeps singular-traffic filtering on, so the link
    # runs in the loop and no completion is skipped); the main decoders' loop ran
    assert counts["main: PREFILL_DONE"] == requests
    assert counts["decoders: completions"] > 0
    total = re.search(r"both loops, handlers timed: [\d.]+ s, ([\d,]+) events", out)
    assert total is not None
    assert int(total[1].replace(",", "")) == sum(counts.values())  # the rows are every event
