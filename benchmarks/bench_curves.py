"""Curves: a 101-point bathtub in <= 3 s (the default: forked workers, one per CPU); a 1,000-point
sweep scales with the number of workers (forked, joblib's loky and a two-worker dask LocalCluster,
each giving exactly the serial points). The gate is timed with the other multi-search commands
(`bench_commands.py`).

    python benchmarks/bench_curves.py
"""

from __future__ import annotations

from pddplan.support.blas import single_threaded_blas

single_threaded_blas()  # as the CLI does, before numpy loads: else forking is unsafe (pddplan/support/blas.py)

from _timing import ROOT, repeat, report, run_cli  # noqa: E402

from pddplan.analyses.bathtub import BathtubOptions, bathtub  # noqa: E402
from pddplan.analyses.sweep import sweep  # noqa: E402
from pddplan.inputs import load_workload, workload_dir  # noqa: E402
from pddplan.support.distribute import Execution  # noqa: E402


def main() -> None:
    workload = load_workload("pdd-agent-64k")
    base = workload_dir("pdd-agent-64k")
    bathtub(workload, base, options=BathtubOptions(points=11))  # warm imports and caches
    ok = report(
        "bathtub, 101 points x every architecture (library)",
        repeat(lambda: bathtub(workload, base, options=BathtubOptions(points=101)), 3),
        3.0,
    )
    ok &= report("pddplan bathtub (CLI process, 101 points)", repeat(lambda: run_cli("bathtub", "--json"), 3), 5.0)
    path = ROOT / "workloads/pdd-agent-64k.yaml"
    values = [1.0 + 15.0 * i / 999 for i in range(1000)]
    results: dict[str, object] = {}

    def timed(label: str, execution: Execution) -> list[float]:
        def call() -> None:
            results[label] = sweep(path, "arrival.rate_rps", values, ("pd-intra", "pdd"), execution)

        return repeat(call, 1)

    one = timed("serial", Execution(jobs=1))
    two = timed("fork", Execution(jobs=2))
    loky = timed("loky", Execution(jobs=2, backend="loky"))
    dask = timed("dask", Execution(jobs=2, backend="dask"))
    report("sweep, 1,000 points, 1 worker", one, None)
    ok &= report("sweep, 1,000 points, 2 forked workers (target: faster than 1 worker)", two, one[0])
    ok &= report("sweep, 1,000 points, 2 loky workers (target: faster than 1 worker)", loky, one[0])
    ok &= report("sweep, 1,000 points, 2-worker dask LocalCluster (target: faster)", dask, one[0])
    same = results["dask"] == results["serial"] == results["loky"] == results["fork"]
    print(f"sweep results of the four runs identical: {same}")
    ok &= same
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
