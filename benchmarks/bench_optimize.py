"""Optimizer: `pddplan optimize workloads/pdd-agent-64k.yaml` in <= 1.0 s median on a 2-core
machine, verification included (the whole process, as a user waits for it; issue 38's target,
issue 33's was 1.5 s); a fleet-scale case (4 datacenters, 5 GPU types, 10,000 GPUs) in <= 15 s.
`optimize --robust` is timed with the other multi-search commands (`bench_commands.py`).

    python benchmarks/bench_optimize.py
"""

from __future__ import annotations

from _timing import repeat, report, run_cli


def main() -> None:
    ok = report(
        "pddplan optimize workloads/pdd-agent-64k.yaml (verified)",
        repeat(lambda: run_cli("optimize", "workloads/pdd-agent-64k.yaml", "--json"), 5),
        1.0,
    )
    ok &= report(
        "pddplan optimize benchmarks/fleet-10k.yaml (verified)",
        repeat(lambda: run_cli("optimize", "benchmarks/fleet-10k.yaml", "--json"), 1),
        15.0,
    )
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
