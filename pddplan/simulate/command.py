"""`pddplan simulate` as library calls: every option by the command's own parameter name, what the
simulation runs (the plan on its workload, or replaying a trace), and the simulation.

    flags = SimulateFlags("examples/plans/pdd-agent-64k-pdd.yaml", "pdd-agent-64k", requests=5_000)
    run = flags.prepare()
    simulation = flags.simulate(run)

Every check is here, so a library caller gets the errors the command line gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddplan.errors import InputError
from pddplan.scenarios.files import plan_scenario
from pddplan.scenarios.scenario import Scenario
from pddplan.simulate.summary import Simulation, record_format, simulate, write_records
from pddplan.trace.replay import TraceReplay, replay_scenario, trace_replay


@dataclass(frozen=True)
class SimulationRun:
    """What a simulation runs: the scenario (offered the trace's mean rate when it replays one), the
    number of requests, the seed, and the replayed requests (None: drawn from the workload)."""

    scenario: Scenario
    requests: int
    seed: int
    replay: TraceReplay | None = None

    @property
    def source(self) -> str:
        """Where the figures come from, in words: the simulation, its requests and its seed."""
        return f"simulated, {self.requests:,} requests, seed {self.seed}"


@dataclass(frozen=True)
class SimulateFlags:
    """Every option of `pddplan simulate`, by the command's parameter names; the number of requests
    and the per-request file's name are checked when the flags are made, before any work."""

    plan: str
    workload: str
    requests: int = 20_000
    seed: int = 0
    per_request: Path | None = None
    trace: Path | None = None
    trace_format: str = "mooncake"
    cache_capacity: str | None = None
    report: Path | None = None
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for fewer than one request, then for a per-request file that is neither CSV
        nor JSON lines (`record_format`)."""
        if self.requests < 1:
            raise InputError(f"--requests = {self.requests}: must be at least 1")
        if self.per_request is not None:
            record_format(self.per_request)

    def prepare(self, progress: Callable[[str], None] | None = None) -> SimulationRun:
        """The plan on the workload; with a trace, its first `requests` requests replayed
        (`trace_replay`, as many as it has) at the trace's mean rate (`replay_scenario`).
        InputError for a cache capacity without a trace."""
        scenario = plan_scenario(self.plan, self.workload)
        if self.trace is None:
            if self.cache_capacity is not None:
                raise InputError("--cache-capacity goes with --trace")
            return SimulationRun(scenario, self.requests, self.seed)
        replay = trace_replay(scenario, self.trace, self.trace_format, self.cache_capacity, self.requests, progress)
        return SimulationRun(replay_scenario(scenario, replay), len(replay), self.seed, replay)

    def simulate(self, run: SimulationRun) -> Simulation:
        """Simulate `run`, then write its per-request records to `per_request` when given."""
        result = simulate(run.scenario, run.requests, run.seed, run.replay)
        if self.per_request is not None:
            write_records(self.per_request, result.table)
        return result
