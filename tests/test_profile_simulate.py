"""benchmarks/profile_simulate.py reads the simulator's internals (its two loops, their handlers):
a small run keeps it working as the engine changes, and its event counts add up."""

from __future__ import annotations

import re

from bench_scripts import script_output


def test_the_profile_script_splits_a_run_into_phases_and_event_kinds() -> None:
    requests = 500
    out = script_output("profile_simulate.py", "--requests", str(requests))
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
