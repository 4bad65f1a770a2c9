"""Where an architecture's search goes (issue 38): one `optimize_architecture` in this process (no
forked workers), its wall time split by phase. Each phase counts its own time only: a phase run
inside another (an evaluation inside a trim) is taken out of the outer one. The phases:

- prefill capacities: the largest rate each prefill pool carries within the SLA (`ProblemBuilder.prepare`);
- program data: the decoders' capacities and line loads of a routing rule (`ProblemBuilder.build`);
- integer programs: PuLP building them and HiGHS solving them (`solve_bcr`);
- closed-form evaluations of the plans the search tries (`ProblemBuilder.evaluated`);
- verification simulations (`verify`);
- the rest: the search's own bookkeeping.

Beside them, inclusively, what the round's second prefill kind costs (`_rival`: its program and its
trim). With `--cprofile`, the functions that take the most time of their own as well.

    python benchmarks/profile_optimize.py [--workload NAME] [--architecture NAME] [--no-verify] [--cprofile]

The first search in a process also fills the step-time tables later ones reuse; this is that first
search, as in a `pddplan optimize` worker. Not a target: `bench_optimize.py` holds the targets.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import problem, search
from pddplan.optimize.options import OptimizeOptions

PHASES = {  # row -> (owner, attribute)
    "prefill capacities": (problem.ProblemBuilder, "prepare"),
    "program data": (problem.ProblemBuilder, "build"),
    "integer programs (PuLP, HiGHS)": (search, "solve_bcr"),
    "closed-form evaluations": (problem.ProblemBuilder, "evaluated"),
    "verification simulations": (search, "verify"),
}


class PhaseClock:
    """Own seconds and calls per phase: a phase's time less that of the phases it runs inside it."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.calls = dict.fromkeys(PHASES, 0)
        self._inner: list[float] = []  # per open phase, the seconds its inner phases took

    def wrap(self, row: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._inner.append(0.0)
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                inner = self._inner.pop()
                self.seconds[row] += took - inner
                self.calls[row] += 1
                if self._inner:
                    self._inner[-1] += took

        return timed


def inclusive(call: Callable[..., Any], totals: list[float]) -> Callable[..., Any]:
    """`call`, adding each call's wall seconds to totals[0]."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            totals[0] += time.perf_counter() - started

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="pdd-agent-64k")
    parser.add_argument("--architecture", default="pdd")
    parser.add_argument("--no-verify", action="store_true", help="no verification simulation")
    parser.add_argument("--cprofile", action="store_true", help="also the functions by their own time")
    args = parser.parse_args()
    workload = load_workload(args.workload)
    inputs = load_input_set(workload, workload_dir(args.workload))
    options = OptimizeOptions(verify=not args.no_verify, jobs=1)

    clock = PhaseClock()
    for row, (owner, name) in PHASES.items():
        setattr(owner, name, clock.wrap(row, getattr(owner, name)))
    rival = [0.0]
    search._rival = inclusive(search._rival, rival)
    profile = cProfile.Profile() if args.cprofile else None
    started = time.perf_counter()
    if profile:
        profile.enable()
    result = search.optimize_architecture(inputs, args.architecture, options)
    if profile:
        profile.disable()
    total = time.perf_counter() - started

    plan = f"${result.scenario.cost_per_hour:,.2f}/h" if result.scenario is not None else "no plan"
    print(
        f"{args.workload}, {args.architecture}: {total:.3f} s, {result.rounds} round(s), {result.solves} solves, {plan}"
    )
    print(f"{'phase (own time)':<34} {'calls':>6} {'seconds':>8} {'share':>6}")
    for row in PHASES:
        print(f"{row:<34} {clock.calls[row]:>6} {clock.seconds[row]:8.3f} {clock.seconds[row] / total:6.1%}")
    rest = total - sum(clock.seconds.values())
    print(f"{'the rest':<34} {'':>6} {rest:8.3f} {rest / total:6.1%}")
    print(f"{'second prefill kind (inclusive)':<34} {'':>6} {rival[0]:8.3f} {rival[0] / total:6.1%}")
    if profile:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue())


if __name__ == "__main__":
    main()
