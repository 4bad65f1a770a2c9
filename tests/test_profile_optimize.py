"""benchmarks/profile_optimize.py wraps the optimizer's phases by name: a small run keeps it working
as the search changes, and its phases' own times add up to the search's."""

from __future__ import annotations

import re

import pytest
from bench_scripts import script_output


def test_the_profile_script_splits_a_search_into_phases_that_add_up() -> None:
    out = script_output("profile_optimize.py", "--architecture", "pd-intra")
    total = re.search(r"^pdd-agent-64k, pd-intra: (\d+\.\d{3}) s, \d+ round\(s\), (\d+) solves", out, re.MULTILINE)
    assert total is not None, out
    rows = {
        name: (int(calls or 0), float(seconds))
        for name, calls, seconds in re.findall(r"^(.+?)\s{2,}(\d+)?\s+(\d+\.\d{3})\s+[\d.]+%$", out, re.MULTILINE)
    }
    for phase in (
        "prefill capacities",
        "program data",
        "integer programs (PuLP, HiGHS)",
        "closed-form evaluations",
        "verification simulations",
    ):
        assert rows[phase][0] >= 1, phase  # every phase ran, verification included
    own = sum(seconds for name, (_, seconds) in rows.items() if not name.startswith("second prefill kind"))
    assert own == pytest.approx(float(total[1]), abs=0.005)  # the phases' own times and the rest: the whole
