"""`pddplan whatif`: a plan's figures under one change, beside its figures as planned.

Changes (any combination):
- rate: `x1.5` (a factor of the plan's rate) or `6` (requests/s);
- hit shift: the mean prefix hit moved by a signed amount, the distribution shifted as the
  bathtub's `shift` mode moves it (`pddplan.scenarios.variants.with_hit`), clipped to [0, 1];
- one failure:
  - `line:OPTION`: one leased line of that WAN option fails. With lines left, the pool shrinks.
    With none left the datacenters are cut apart: the main decoders are unreachable, so PDD's
    dedicated relay instances decode every request to the end in datacenter A (the plan becomes
    intra-datacenter PD with the relay instances as its decoders); a relay on the prefill
    instances, pd-cross and pd-hetero's remote decoders have nothing to fall back to, and all
    traffic is shed (goodput 0), which the result says;
  - `instance:ROLE` (prefill, relay or decode): one instance of that role fails. A role left with
    none: no prefill or no decoder sheds everything, except PDD's main decoders, whose requests
    the relay then finishes as above; no relay means every request goes P -> MD (threshold 0; the
    failed relay's GPUs are still paid for).
The figures come from the closed form and, with `simulate`, from the simulator too; cost is the
purchase's (what failed is still paid for), so BCR falls with what is no longer served. These are
the steady figures of the degraded deployment.

The transient (`Change.at_s`, with `simulate`; a line failure that leaves lines): the plan as
planned is simulated with its line pool keeping `share` = (capacity left) / (pool capacity) of its
capacity from `at_s` on, so transfers in flight slow down mid-way and the backlog builds. Reported:
- the requests in flight at `at_s` (prefill done, a WAN transfer owed, no first token yet) and
  their TTFT (median, worst);
- the TTFT P90 of the requests arriving before `at_s`, and of those arriving until it settles;
- `settle_s`: from `at_s` until the link is in the degraded deployment's state: the first moment
  it is empty both in this run and in a run of the degraded deployment over the same requests
  (same seed): from then on the two carry the same transfers. Null when that never happens in the
  simulated span (an overloaded line never empties).
Instance failures and a WAN cut have no transient here: requests in flight on a failed instance
are lost or retried as the serving stack does, which pddplan does not model.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
from pydantic import Field

from pddplan.errors import InputError
from pddplan.evaluate.analytic import evaluate
from pddplan.evaluate.capacity_view import rebalanced
from pddplan.evaluate.outputs import Evaluation
from pddplan.inputs import load_plan
from pddplan.inputs.input_set import InputSet
from pddplan.scenarios.failures import Change, apply
from pddplan.scenarios.files import workload_inputs
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.engine import simulate_requests as run
from pddplan.simulate.outputs import Simulation
from pddplan.simulate.summary import simulate
from pddplan.support.limits import check_requests, check_seed
from pddplan.support.outputs import Output


class Transient(Output):
    """`whatif --at`: a line failing mid-simulation (pddplan.analyses.whatif)."""

    at_s: float
    capacity_share_left: float = Field(description="the line pool's capacity left, as a share")
    in_flight: int = Field(description="requests with a WAN transfer owed and no first token at at_s")
    in_flight_ttft_p50_s: float | None
    in_flight_ttft_max_s: float | None
    ttft_p90_before_s: float
    ttft_p90_until_settled_s: float | None
    transfers_in_flight_peak: int
    transfers_in_flight_degraded_mean: float
    settle_s: float | None = Field(
        description="seconds from at_s until the link carries what the degraded deployment does (null: never)"
    )


class WhatIfOutput(Output):
    """`whatif --json`: the plan's figures as planned and after the change (null: all shed)."""

    change: str
    mode: str = Field(description="how the deployment runs after the change, in words")
    before: Evaluation
    after: Evaluation | None
    simulated_before: Simulation | None
    simulated_after: Simulation | None
    transient: Transient | None = Field(description="with --at: the line failure's transient")


def whatif(inputs: InputSet, plan: Any, change: Change, simulate_requests: int = 0, seed: int = 0) -> WhatIfOutput:
    """`plan`'s figures before and after `change` (module docstring), on `inputs`' workload."""

    scenario = build_scenario(plan, inputs, source="plan")
    changed, rate, mode = apply(inputs, scenario, change)
    if changed is not None and change.fail:  # a split plan's router moves requests off the pool that lost one
        changed, moved = rebalanced(changed)
        mode = f"{mode}; {moved}" if moved else mode
    before = evaluate(scenario).to_output()
    after = _paid_for(evaluate(changed, rate).to_output(), scenario.cost_per_hour) if changed is not None else None
    sim_before = sim_after = None
    if simulate_requests:
        sim_before = simulate(scenario, simulate_requests, seed).summary
        if changed is not None:
            offered = changed.plan.model_copy(update={"rate_rps": None})
            workload = changed.workload.model_copy(
                update={"arrival": changed.workload.arrival.model_copy(update={"rate_rps": rate})}
            )
            sim_after = simulate(replace(changed, plan=offered, workload=workload), simulate_requests, seed).summary
    if sim_after is not None:
        sim_after = _paid_for(sim_after, scenario.cost_per_hour)
    transient = None
    if change.at_s is not None:
        transient = _transient(scenario, changed, change, simulate_requests, seed)
    return WhatIfOutput(
        change=change.describe(),
        mode=mode,
        before=before,
        after=after,
        simulated_before=sim_before,
        simulated_after=sim_after,
        transient=transient,
    )


def check_transient(change: Change, simulate_requests: int) -> None:
    """InputError unless the transient can be simulated: `--at` needs --simulate and a line failure."""
    if change.at_s is None:
        return
    if not (math.isfinite(change.at_s) and 0 < change.at_s <= 1e7):
        raise InputError(f"--at = {change.at_s:g}: expected seconds above 0 and at most 1e7")
    if not simulate_requests:
        raise InputError("--at simulates the transient: add --simulate")
    if change.fail is None or not change.fail.startswith("line:") or change.rate or change.hit_shift:
        raise InputError("--at applies to one line failure alone (--fail line:OPTION, without --rate or --hit-shift)")


F = TypeVar("F", Evaluation, Simulation)


@dataclass(frozen=True)
class WhatifFlags:
    """Every option of `pddplan whatif`, by the command's parameter names; checked when the flags
    are made, before any file is read."""

    plan: str
    workload: str
    rate: str | None = None
    hit_shift: float = 0.0
    fail: str | None = None
    simulate_flag: bool = False
    requests: int = 20_000
    seed: int = 0
    at_s: float | None = None
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError when no change is given, when the transient cannot be simulated
        (`check_transient`), and, with `simulate_flag`, for requests or a seed out of bounds."""
        if self.rate is None and not self.hit_shift and self.fail is None:
            raise InputError("give a change: --rate, --hit-shift or --fail")
        check_transient(self.change, self.simulate_requests)
        if self.simulate_flag:
            check_requests(self.requests)
            check_seed(self.seed)

    @property
    def change(self) -> Change:
        """The change asked for."""
        return Change(self.rate, self.hit_shift, self.fail, self.at_s)

    @property
    def simulate_requests(self) -> int:
        """Requests to simulate before and after the change: 0 without `simulate_flag`."""
        return self.requests if self.simulate_flag else 0

    def run(self, progress: Callable[[str], None] | None = None) -> WhatIfOutput:
        """The plan's figures before and after the change (`whatif`), on the workload's inputs."""
        inputs = workload_inputs(self.workload)
        if progress is not None:
            progress("evaluating...")
        return whatif(inputs, load_plan(self.plan), self.change, self.simulate_requests, self.seed)


def _transient(scenario: Scenario, changed: Scenario | None, change: Change, requests: int, seed: int) -> Transient:
    """The line failure's transient (module docstring)."""

    assert change.at_s is not None
    at_s = change.at_s
    if changed is None or changed.link is None or scenario.link is None:
        raise InputError(f"--at: {change.fail} leaves no line, so there is no transfer to slow down (see the mode)")
    share = changed.link.capacity_bytes_per_s / scenario.link.capacity_bytes_per_s
    table, stats = run(scenario, requests, seed, link_change=(at_s, share), record_link=True)
    if not table.arrival_s[0] < at_s < table.arrival_s[-1]:
        raise InputError(
            f"--at = {at_s:g} s: the {requests:,} simulated requests arrive from {table.arrival_s[0]:.1f} s to "
            f"{table.arrival_s[-1]:.1f} s; pick a time inside, or more --requests"
        )
    _, degraded = run(changed, requests, seed, record_link=True)
    settle_s = _first_common_idle(stats.link_timeline or [], degraded.link_timeline or [], at_s)
    steady = _mean_in_flight(degraded.link_timeline or [(0.0, 0)])
    times = np.array([t for t, _ in stats.link_timeline or [(0.0, 0)]])
    flows = np.array([n for _, n in stats.link_timeline or [(0.0, 0)]])
    after = times >= at_s
    in_flight = (table.wan_bytes > 0) & (table.prefill_end_s <= at_s) & (table.first_token_s > at_s)
    ttft = table.ttft_s
    before = table.arrival_s < at_s
    end = at_s + (settle_s if settle_s is not None else math.inf)
    during = (table.arrival_s >= at_s) & (table.arrival_s <= end)
    return Transient(
        at_s=at_s,
        capacity_share_left=share,
        in_flight=int(in_flight.sum()),
        in_flight_ttft_p50_s=float(np.median(ttft[in_flight])) if in_flight.any() else None,
        in_flight_ttft_max_s=float(ttft[in_flight].max()) if in_flight.any() else None,
        ttft_p90_before_s=float(np.quantile(ttft[before], 0.9)),
        ttft_p90_until_settled_s=float(np.quantile(ttft[during], 0.9)) if during.any() else None,
        transfers_in_flight_peak=int(flows[after].max()) if after.any() else 0,
        transfers_in_flight_degraded_mean=steady,
        settle_s=settle_s,
    )


def _idle_from(timeline: list[tuple[float, int]]) -> list[float]:
    """The times the link becomes empty."""
    return [t for t, n in timeline if n == 0]


def _first_common_idle(a: list[tuple[float, int]], b: list[tuple[float, int]], at_s: float) -> float | None:
    """Seconds from `at_s` to the first moment both links are empty (None: never in the span).

    Each timeline lists (t, transfers in flight) at every change; a link is empty from a 0 entry
    until its next entry. The first common moment is the earliest t >= at_s at which one becomes
    empty while the other is already."""

    def empty_at(timeline: list[tuple[float, int]], times: list[float], t: float) -> bool:
        i = bisect.bisect_right(times, t) - 1
        return i >= 0 and timeline[i][1] == 0

    times_a, times_b = [t for t, _ in a], [t for t, _ in b]
    for t in sorted(x for x in (*_idle_from(a), *_idle_from(b)) if x >= at_s):
        if empty_at(a, times_a, t) and empty_at(b, times_b, t):
            return t - at_s
    return None


def _mean_in_flight(timeline: list[tuple[float, int]]) -> float:
    """Time average of the transfers in flight over a recorded timeline."""
    area = sum((t1 - t0) * n0 for (t0, n0), (t1, _) in itertools.pairwise(timeline))
    span = timeline[-1][0] - timeline[0][0]
    return area / span if span > 0 else 0.0


def _paid_for(figures: F, purchased_usd_per_hour: float) -> F:
    """Figures of a degraded deployment at the purchase's cost: a failed instance or line is still
    paid for, so cost stays and BCR = goodput x 3600 / that cost."""
    bcr = figures.goodput_rps * 3600 / purchased_usd_per_hour if purchased_usd_per_hour > 0 else 0.0
    paid = figures.model_copy()
    paid.cost_usd_per_hour, paid.bcr = purchased_usd_per_hour, bcr
    return paid
