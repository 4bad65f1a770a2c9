"""Where `simulate`'s time goes (issue 38): a run of pdd-agent-64k's optimized PDD plan split into
its phases (drawing the requests and running the prefill pool, the main event loop, the main
decoders' own loop, the results table), then both loops by event kind: how many events of each
kind, how many were stale (a relay's pending step replaced before it came due, popped and
dropped), and the time their handlers took. With `--cprofile`, the functions that take
the most time of their own as well.

    python benchmarks/profile_simulate.py [--requests N] [--workload NAME] [--architecture NAME] [--cprofile]

Timing each handler adds a wrapper call per event, so the per-kind times add up to more than the
loop takes alone; read them as shares. Not a target: `bench_simulate.py` holds the targets.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import time
from collections.abc import Callable

import numpy as np

from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.run import optimize
from pddplan.optimize.search import OptimizeOptions
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.engine import Event, _Simulation
from pddplan.simulate.servers import DecodeInstance

Handler = Callable[[int, float, int], None]


def optimized_scenario(workload_name: str, architecture: str) -> Scenario:
    """The scenario of `architecture`'s optimized plan for the workload (no verification)."""
    workload = load_workload(workload_name)
    base = workload_dir(workload_name)
    report = optimize(workload, base, OptimizeOptions(verify=False), (architecture,))
    plan = report.results[0].plan
    if plan is None:
        raise SystemExit(f"{architecture} has no plan for {workload_name}")
    return build_scenario(plan, load_input_set(workload, base))


def _stale(simulation: _Simulation, kind: Event, target: int, version: int) -> bool:
    """Whether a relay's step event was replaced before it came due."""
    return kind is Event.DECODER_STEP and version != simulation.instances[target][1].version


Totals = dict[str, list[float]]  # row -> [events, stale events, seconds]


def timed_handlers(simulation: _Simulation) -> Totals:
    """Wrap `simulation`'s handlers in both loops (the main decoders' completions included); per
    row [events, stale events, seconds] as they run."""
    totals: Totals = collections.defaultdict(lambda: [0, 0, 0.0])
    clock = time.perf_counter

    def wrap(row: str, kind: Event, handler: Handler) -> Handler:
        entry = totals[row]

        def timed(target: int, t: float, version: int) -> None:
            entry[0] += 1
            entry[1] += _stale(simulation, kind, target, version)
            started = clock()
            handler(target, t, version)
            entry[2] += clock() - started

        return timed

    simulation.handlers = {kind: wrap(f"main: {kind.name}", kind, h) for kind, h in simulation.handlers.items()}
    simulation.decode_handlers = {
        kind: wrap(f"decoders: {kind.name}", kind, h) for kind, h in simulation.decode_handlers.items()
    }
    on_link = simulation._on_link
    link_events = totals["main: link"]

    def timed_link(t: float) -> None:
        link_events[0] += 1
        started = clock()
        on_link(t)
        link_events[2] += clock() - started

    simulation._on_link = timed_link  # type: ignore[method-assign]
    finish_due = simulation._finish_due
    completions = totals["decoders: completions"]

    def timed_finish(role: str, inst: DecodeInstance, t: float) -> None:
        completions[0] += 1
        started = clock()
        finish_due(role, inst, t)
        completions[2] += clock() - started

    simulation._finish_due = timed_finish  # type: ignore[method-assign]
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--workload", default="pdd-agent-64k")
    parser.add_argument("--architecture", default="pdd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cprofile", action="store_true", help="also the functions by their own time")
    args = parser.parse_args()
    scenario = optimized_scenario(args.workload, args.architecture)
    print(f"{args.workload}, {args.architecture}'s optimized plan, {args.requests:,} requests, seed {args.seed}")

    clock = time.perf_counter
    marks = [clock()]
    simulation = _Simulation(scenario, args.requests, np.random.default_rng(args.seed))
    marks.append(clock())
    simulation._loop(simulation._known_events(), simulation.handlers)
    marks.append(clock())
    simulation._run_decoders()
    marks.append(clock())
    simulation.table()
    marks.append(clock())
    print(f"{'phase':<40} {'seconds':>8}")
    phases = ("draw requests, caches, prefill pool", "main loop", "main decoders' loop", "results table")
    for name, begin, end in zip(phases, marks[:-1], marks[1:], strict=True):
        print(f"{name:<40} {end - begin:8.3f}")

    simulation = _Simulation(scenario, args.requests, np.random.default_rng(args.seed))
    totals = timed_handlers(simulation)
    began = clock()
    simulation.run()
    loop_s = clock() - began
    handled = sum(entry[2] for entry in totals.values())
    events = sum(int(entry[0]) for entry in totals.values())
    per_request = events / args.requests
    print(f"\nboth loops, handlers timed: {loop_s:.3f} s, {events:,} events ({per_request:.1f} per request)")
    print(f"{'event kind':<28} {'events':>9} {'stale':>8} {'seconds':>8} {'share':>6} {'us/event':>9}")
    for row, (count, stale, seconds) in sorted(totals.items(), key=lambda item: -item[1][2]):
        print(
            f"{row:<28} {int(count):>9,} {int(stale):>8,} {seconds:8.3f} {seconds / handled:6.1%}"
            f" {seconds / max(count, 1) * 1e6:9.2f}"
        )
    print(f"{'(the loops themselves)':<28} {'':>9} {'':>8} {loop_s - handled:8.3f}")

    if args.cprofile:
        profile = cProfile.Profile()
        simulation = _Simulation(scenario, args.requests, np.random.default_rng(args.seed))
        profile.enable()
        simulation.run()
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
