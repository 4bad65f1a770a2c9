"""The integer program (`pddplan.optimize.model`) against brute force on small synthetic instances.

Each instance is a hand-made `ProblemData`: a few instance candidates with small `max_count`,
decoder capacities, prefill capacities per pool size, one to three WAN pools (or datacenters for
pd-intra) and an inventory. The brute force walks every integer choice (prefill kind and pool
size, decode kind and count, relay kind and count, pool) and, for each, the best served rate the
constraints allow (the minimum over them), then applies the mode's objective:

  rate    minimum cost serving exactly the target rate;
  budget  maximum served rate with cost <= budget (cost * 1e-6 breaks ties, as documented);
  bcr     maximum rate / cost (Dinkelbach through `problem.solve_bcr`); with min_served_fraction = 1
          the rate is fixed at the ceiling, otherwise each choice serves its own maximum rate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pddplan import architectures
from pddplan.architectures import DecodeGpu
from pddplan.evaluate.capacity import RDMA_PATH, DecoderCapacity, PathLoad
from pddplan.inputs import load_hardware, load_model, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.net.lines import LinePool
from pddplan.optimize import model as milp
from pddplan.optimize.candidates import Candidate, wan_configs
from pddplan.optimize.options import Mode, OptimizeOptions
from pddplan.optimize.problem import solve_bcr
from pddplan.optimize.solver import SolverOptions, solve
from pddplan.perf import Instance

REL = 1e-6
GPUS = ("h100-sxm", "h20")
OPTIONS = SolverOptions()


# -- building blocks --------------------------------------------------------------------------------
_INSTANCE = None
_LINE = None


def instance() -> Any:
    """A real roofline instance (llama-3.1-8b on one H100); only diagnosis reads it."""
    global _INSTANCE
    if _INSTANCE is None:
        from pddplan.perf import Instance

        _INSTANCE = Instance(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), 1)
    return _INSTANCE


def base_line() -> LinePool:
    """A real pooled WAN line, to copy with other endpoints and prices."""
    global _LINE
    if _LINE is None:
        _LINE = wan_configs(load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k")))[0]
    return _LINE


def candidate(dc: str, gpu: str, tp: int, usd: float, max_count: int) -> Candidate:
    return Candidate(
        datacenter=dc,
        gpu=gpu,
        tp=tp,
        instance=instance(),
        usd_per_hour=usd,
        kv_capacity_bytes=40e9,
        max_count=max_count,
    )


def decoder(
    cand: Candidate,
    requests_per_s: float,
    memory_gb: float,
    step_s: float = 0.03,
    sequence_gb: float = 0.5,
    occupancy: float = 10.0,
    usable: bool = True,
) -> DecoderCapacity[Candidate]:
    if not usable:
        return DecoderCapacity(cand, 0, math.inf, 0.0, 0.0, memory_gb * 1e9, sequence_gb * 1e9)
    return DecoderCapacity(
        candidate=cand,
        batch=32,
        step_s=step_s,
        occupancy=occupancy,
        requests_per_s=requests_per_s,
        memory_bytes=memory_gb * 1e9,
        sequence_bytes=sequence_gb * 1e9,
    )


def line(source: str, target: str, usd: float) -> LinePool:
    return replace(base_line(), source=source, target=target, usd_per_hour=usd)


# -- random instances ---------------------------------------------------------------------------------
@st.composite
def problems(draw: Any, mode: Mode, min_served: float | None = None) -> milp.ProblemData:
    """A small random ProblemData: hypothesis draws the seed of a generator that draws the rest."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = architectures.names()
    arch = architectures.get(names[int(rng.integers(len(names)))])
    n_pools = int(rng.integers(1, 4))
    n_prefill = int(rng.integers(1, 3))
    n_decode = 0 if arch.colocated else int(rng.integers(1, 4))  # co-located: the prefill pool decodes
    n_relay = int(rng.integers(1, 3)) if arch.has_relay else 0
    ceiling = float(rng.uniform(1.0, 5.0))

    def dc_choice(options: list[str]) -> str:
        return options[int(rng.integers(len(options)))]

    def make_candidate(dcs: list[str]) -> Candidate:
        tp = int(rng.choice([1, 2, 4]))
        return candidate(
            dc_choice(dcs), dc_choice(list(GPUS)), tp, tp * float(rng.uniform(1.0, 4.0)), int(rng.integers(1, 5))
        )

    if not arch.uses_wan:
        datacenters = ["dc-a", "dc-b", "dc-c"][:n_pools]
        pools = [RDMA_PATH for _ in datacenters]
        prefill_dcs = decode_dcs = datacenters
        relay_dcs: list[str] = []
    else:
        datacenters = ["dc-a"]
        pools = []
        for _ in range(n_pools):
            target = dc_choice(["dc-b", "dc-c"])
            pools.append(
                PathLoad(
                    line=line("dc-a", target, float(rng.uniform(0.5, 15.0))),
                    wan_bytes_per_request=1e8,
                    md_load_fraction=float(rng.uniform(0.3, 1.0)) if arch.has_relay else 1.0,
                    relay_hold_s=float(rng.uniform(0.5, 4.0)) if arch.has_relay else 0.0,
                    max_rate=ceiling * float(rng.uniform(0.5, 1.6)),
                )
            )
        # mostly where they can be used, sometimes not (the location constraints must reject those)
        prefill_dcs = ["dc-a"] * 6 + ["dc-b"]
        decode_dcs = ["dc-b", "dc-c", "dc-b", "dc-c", "dc-a"]
        relay_dcs = ["dc-a"] * 6 + ["dc-b"]
    prefill = [make_candidate(prefill_dcs) for _ in range(n_prefill)]

    prefill_caps: dict[tuple[int, int], np.ndarray] = {}
    for c, cand in enumerate(prefill):
        steps = rng.uniform(0.3, 0.9, size=cand.max_count) * ceiling
        if rng.random() < 0.3:
            steps[0] = 0.0  # one instance cannot meet the TTFT SLA at any rate
        caps = np.cumsum(steps)
        for k in range(len(pools)):
            if locations_of(pools, datacenters, k)[0] == cand.datacenter:
                prefill_caps[(c, k)] = caps * float(rng.uniform(0.7, 1.2))
    mean_output = float(rng.uniform(100.0, 1000.0))
    drc = float(rng.uniform(0.0, 10e9)) if arch.uses_wan else 0.0
    decode = []
    for _ in range(n_decode):
        cand = make_candidate(decode_dcs)
        if not arch.uses_wan and rng.random() < 0.7:
            # usually where a prefill kind is, on its GPU type (pd-intra) or the other one (pd-hetero)
            twin = prefill[int(rng.integers(len(prefill)))]
            gpu = twin.gpu if arch.decode_gpu is DecodeGpu.SAME else next(g for g in GPUS if g != twin.gpu)
            cand = replace(cand, datacenter=twin.datacenter, gpu=gpu)
        elif arch.uses_wan and rng.random() < 0.7:  # usually at the end of some line pool
            cand = replace(cand, datacenter=locations_of(pools, datacenters, int(rng.integers(len(pools))))[1])
        step = float(rng.uniform(0.01, 0.05))
        seq_gb = float(rng.uniform(0.05, 0.5))
        per_rps_gb = mean_output * step * seq_gb + drc / 1e9
        decode.append(
            decoder(
                cand,
                requests_per_s=ceiling * float(rng.uniform(0.3, 1.2)),
                memory_gb=per_rps_gb * ceiling * float(rng.uniform(0.3, 1.2)),
                step_s=step,
                sequence_gb=seq_gb,
                usable=rng.random() > 0.15,
            )
        )
    relay = []
    for _ in range(n_relay):
        cand = make_candidate(relay_dcs)
        relay.append(
            decoder(cand, 1.0, 50.0, occupancy=float(rng.uniform(1.0, 8.0)) * ceiling, usable=rng.random() > 0.1)
        )
    inventory = {}
    for cand in [*prefill, *(d.candidate for d in decode), *(r.candidate for r in relay)]:
        inventory[(cand.datacenter, cand.gpu)] = int(rng.integers(4, 33))
    data = milp.ProblemData(
        architecture=arch,
        prefill=prefill,
        prefill_caps=prefill_caps,
        decode=decode,
        relay=relay,
        pools=pools,
        datacenters=datacenters,
        decode_cache_bytes_per_rps=drc,
        mean_output_tokens=mean_output,
        inventory=inventory,
        rate_ceiling=ceiling,
        mode=mode,
    )
    if mode == "rate":
        data.target_rate = ceiling * float(rng.uniform(0.2, 1.0))
    elif mode == "budget":
        data.budget_per_hour = float(rng.uniform(10.0, 120.0))
    else:
        data.min_served_fraction = min_served if min_served is not None else float(rng.choice([0.0, 0.5]))
    return data


# -- brute force -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    pool: int
    prefill: tuple[int, int]
    decode: tuple[int, int] | None  # None: co-located, the prefill pool decodes
    relay: tuple[int, int] | None
    cost: float
    max_rate: float


def locations_of(pools: list[PathLoad], datacenters: list[str], k: int) -> tuple[str, str]:
    """(prefill and relay datacenter, decode datacenter) of pool k."""
    ln = pools[k].line
    if ln is None:
        return datacenters[k], datacenters[k]
    return ln.source, ln.target


def locations(data: milp.ProblemData, k: int) -> tuple[str, str]:
    return locations_of(data.pools, data.datacenters, k)


def prefill_cap(data: milp.ProblemData, c: int, n: int, k: int) -> float:
    caps = data.prefill_caps.get((c, k))
    if caps is None or n > len(caps):
        return 0.0
    return float(caps[n - 1])


def evaluate_choice(
    data: milp.ProblemData, k: int, c: int, n: int, decode: tuple[int, int] | None, relay: tuple[int, int] | None
) -> Choice | None:
    """Cost and the largest rate a choice carries, or None when its integers break a constraint
    (`decode` None: co-located, the prefill pool's capacity covers decoding)."""
    source, target = locations(data, k)
    pre = data.prefill[c]
    if pre.datacenter != source:
        return None
    used: dict[tuple[str, str], int] = {}
    used[(pre.datacenter, pre.gpu)] = used.get((pre.datacenter, pre.gpu), 0) + n * pre.tp
    load = data.pools[k]
    bounds = [data.rate_ceiling, prefill_cap(data, c, n, k)]
    cost = n * pre.usd_per_hour
    if decode is not None:
        d, m = decode
        dec = data.decode[d]
        if dec.candidate.datacenter != target:
            return None
        rule = data.architecture.decode_gpu
        if rule is DecodeGpu.SAME and dec.candidate.gpu != pre.gpu:
            return None
        if rule is DecodeGpu.OTHER and dec.candidate.gpu == pre.gpu:
            return None
        key = (dec.candidate.datacenter, dec.candidate.gpu)
        used[key] = used.get(key, 0) + m * dec.candidate.tp
        a = load.md_load_fraction
        bounds += [
            dec.requests_per_s * m / a,
            m * dec.memory_rate(a * data.mean_output_tokens, data.decode_cache_bytes_per_rps),
        ]
        cost += m * dec.candidate.usd_per_hour
    if data.prefill_cache_bytes_per_rps > 0 and data.prefill_cache_room:
        bounds.append(n * data.prefill_cache_room.get(c, 0.0) / data.prefill_cache_bytes_per_rps)
    if relay is not None:
        r, mr = relay
        rel = data.relay[r]
        if rel.candidate.datacenter != source:
            return None
        key = (rel.candidate.datacenter, rel.candidate.gpu)
        used[key] = used.get(key, 0) + mr * rel.candidate.tp
        if load.relay_hold_s > 0:
            bounds.append(rel.occupancy * mr / load.relay_hold_s)
        cost += mr * rel.candidate.usd_per_hour
    if any(used[key] > data.inventory.get(key, math.inf) for key in used):
        return None
    if load.line is not None:
        bounds.append(load.max_rate)
        cost += load.line.usd_per_hour
    return Choice(k, (c, n), decode, relay, cost, max(min(bounds), 0.0))


def all_choices(data: milp.ProblemData) -> list[Choice]:
    """Every integer choice the program has, with its cost and largest feasible rate."""
    sizes = max((len(caps) for caps in data.prefill_caps.values()), default=0)
    prefill = [
        (c, n)
        for c in range(len(data.prefill))
        for n in range(1, sizes + 1)
        if any(prefill_cap(data, c, n, k) > 0 for k in range(len(data.pools)))
    ]
    decode: list[tuple[int, int] | None] = [
        (d, m) for d, cap in enumerate(data.decode) if cap.usable for m in range(cap.candidate.max_count + 1)
    ]
    if data.architecture.colocated:
        decode = [None]
    relay: list[tuple[int, int] | None] = [None]
    if data.architecture.has_relay:
        relay = [
            (r, m) for r, cap in enumerate(data.relay) if cap.usable for m in range(1, cap.candidate.max_count + 1)
        ]
    out = []
    for k, (c, n), dm, rl in itertools.product(range(len(data.pools)), prefill, decode, relay):
        choice = evaluate_choice(data, k, c, n, dm, rl)
        if choice is not None:
            out.append(choice)
    return out


def close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def brute_rate(data: milp.ProblemData) -> float | None:
    """Minimum cost serving exactly the target rate."""
    assert data.target_rate is not None
    costs = [ch.cost for ch in all_choices(data) if ch.max_rate >= data.target_rate * (1 - 1e-9)]
    return min(costs, default=None)


def brute_budget(data: milp.ProblemData) -> tuple[float, float] | None:
    """(objective rate - 1e-6 cost, rate) of the best choice within the budget."""
    assert data.budget_per_hour is not None
    within = [ch for ch in all_choices(data) if ch.cost <= data.budget_per_hour * (1 + 1e-9)]
    if not within:
        return None
    best = max(within, key=lambda ch: ch.max_rate - 1e-6 * ch.cost)
    return best.max_rate - 1e-6 * best.cost, best.max_rate


def brute_bcr(data: milp.ProblemData) -> float | None:
    """Best rate / cost, each choice serving its largest rate, at least the minimum served share."""
    low = data.min_served_fraction * data.rate_ceiling
    ratios = [
        ch.max_rate / ch.cost
        for ch in all_choices(data)
        if ch.max_rate >= low * (1 - 1e-9) and ch.max_rate > 1e-9 and ch.cost > 0
    ]
    return max(ratios, default=None)


def check_solution(data: milp.ProblemData, solution: milp.Solution) -> Choice:
    """The solver's integers form a valid choice, its rate fits it and its cost is that choice's cost."""
    c, n = solution.prefill
    choice = evaluate_choice(data, solution.pool, c, n, solution.decode, solution.relay)
    assert choice is not None, f"solver picked a choice that breaks a constraint: {solution}"
    assert solution.rate <= choice.max_rate * (1 + 1e-6) + 1e-7, (solution, choice)
    assert close(solution.cost_per_hour, choice.cost, 1e-9), (solution, choice)
    return choice


def solve_mode(data: milp.ProblemData) -> milp.Solution | None:
    model, variables = milp.build(data)
    if solve(model, OPTIONS) == "infeasible":
        return None
    return milp.read_solution(data, variables)


# -- brute-force confirmation ------------------------------------------------------------------------
HYPOTHESIS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(problems("rate"))
def test_rate_mode_matches_brute_force(data: milp.ProblemData) -> None:
    expected = brute_rate(data)
    solution = solve_mode(data)
    if expected is None:
        assert solution is None, f"program found {solution} where no choice serves {data.target_rate}"
        return
    assert solution is not None, f"program infeasible, brute force finds cost {expected}"
    check_solution(data, solution)
    assert close(solution.rate, data.target_rate)  # type: ignore[arg-type]
    assert close(solution.cost_per_hour, expected), (solution.cost_per_hour, expected)


@HYPOTHESIS
@given(problems("budget"))
def test_budget_mode_matches_brute_force(data: milp.ProblemData) -> None:
    expected = brute_budget(data)
    solution = solve_mode(data)
    if expected is None:
        assert solution is None, f"program found {solution} where nothing fits the budget"
        return
    assert solution is not None, f"program infeasible, brute force finds {expected}"
    check_solution(data, solution)
    assert solution.cost_per_hour <= data.budget_per_hour * (1 + 1e-9) + 1e-7  # type: ignore[operator]
    objective, rate = expected
    assert close(solution.rate - 1e-6 * solution.cost_per_hour, objective), (solution, expected)
    # the tie-breaker may trade at most 1e-6 of rate per $/h
    assert solution.rate >= rate - 1e-6 * max(1.0, rate) - 1e-6 * solution.cost_per_hour


@HYPOTHESIS
@given(problems("bcr", min_served=1.0))
def test_bcr_full_rate_matches_brute_force(data: milp.ProblemData) -> None:
    """min_served_fraction = 1: the rate is the ceiling, so the best ratio is ceiling / min cost."""
    expected = brute_bcr(data)
    solution, solves = solve_bcr(data, OptimizeOptions(solver=OPTIONS))
    if expected is None:
        assert solution is None, f"Dinkelbach returned {solution} where no choice serves the ceiling"
        return
    assert solution is not None, f"Dinkelbach found nothing, brute force finds ratio {expected}"
    check_solution(data, solution)
    assert close(solution.rate, data.rate_ceiling)
    assert close(solution.rate / solution.cost_per_hour, expected), (solution, expected)
    assert solves >= 1


@HYPOTHESIS
@given(problems("bcr"))
def test_bcr_partial_rate_matches_brute_force(data: milp.ProblemData) -> None:
    """min_served_fraction < 1: each choice may serve anything from the floor to its own maximum."""
    expected = brute_bcr(data)
    solution, _ = solve_bcr(data, OptimizeOptions(solver=OPTIONS))
    if expected is None:
        assert solution is None, f"Dinkelbach returned {solution} where no choice serves the floor"
        return
    assert solution is not None, f"Dinkelbach found nothing, brute force finds ratio {expected}"
    check_solution(data, solution)
    assert solution.rate >= data.min_served_fraction * data.rate_ceiling * (1 - 1e-6) - 1e-7
    assert close(solution.rate / solution.cost_per_hour, expected), (solution, expected)


def test_random_instances_are_varied() -> None:
    """The generators yield every architecture, feasible and infeasible instances, budgets that
    bind partway, and full-rate BCR instances that can be served (else the brute-force tests above
    would prove little)."""
    seen: dict[str, int] = {}

    def bump(key: str) -> None:
        seen[key] = seen.get(key, 0) + 1

    # 100 examples: the fixed sample changes with each hypothesis release, and 40 left some releases
    # (6.100, 6.120, 6.130) with a single pd-cross instance
    @settings(max_examples=100, deadline=None, derandomize=True)
    @given(problems("rate"), problems("budget"), problems("bcr", min_served=1.0))
    def count(rate: milp.ProblemData, budget: milp.ProblemData, bcr: milp.ProblemData) -> None:
        bump(rate.architecture.name)
        bump("rate-feasible" if brute_rate(rate) is not None else "rate-infeasible")
        best = brute_budget(budget)
        if best is not None and 1e-9 < best[1] < budget.rate_ceiling * (1 - 1e-9):
            bump("budget-partial")
        if brute_bcr(bcr) is not None:
            bump("bcr-full-feasible")

    count()
    assert all(seen.get(arch, 0) >= 5 for arch in architectures.names()), seen
    assert seen.get("rate-feasible", 0) >= 10 and seen.get("rate-infeasible", 0) >= 5, seen
    assert seen.get("budget-partial", 0) >= 5 and seen.get("bcr-full-feasible", 0) >= 5, seen


# -- hand-made instances -------------------------------------------------------------------------------
def pdd_problem(mode: Mode = "bcr", **changes: Any) -> milp.ProblemData:
    """Two prefill kinds and two relay kinds at dc-a, two decode kinds at dc-b, two line pools."""
    p0 = candidate("dc-a", "h100-sxm", 2, 8.0, 3)
    p1 = candidate("dc-a", "h20", 1, 2.5, 4)
    d0 = candidate("dc-b", "h20", 2, 5.0, 4)
    d1 = candidate("dc-b", "h100-sxm", 1, 4.0, 3)
    r0 = candidate("dc-a", "h100-sxm", 1, 4.0, 2)
    pools = [
        PathLoad(line("dc-a", "dc-b", 3.0), 1e8, 0.9, 1.5, 2.5),
        PathLoad(line("dc-a", "dc-b", 7.0), 1e8, 0.8, 1.0, 6.0),
    ]
    caps = {
        (0, 0): np.array([1.5, 3.2, 4.5]),
        (0, 1): np.array([1.6, 3.4, 5.0]),
        (1, 0): np.array([0.0, 0.9, 1.6, 2.4]),
        (1, 1): np.array([0.0, 1.0, 1.8, 2.6]),
    }
    data = milp.ProblemData(
        architecture=architectures.get("pdd"),
        prefill=[p0, p1],
        prefill_caps=caps,
        decode=[decoder(d0, 1.2, 60.0), decoder(d1, 0.9, 30.0)],
        relay=[decoder(r0, 1.0, 50.0, occupancy=4.0)],
        pools=pools,
        datacenters=["dc-a"],
        decode_cache_bytes_per_rps=2e9,
        mean_output_tokens=500.0,
        inventory={("dc-a", "h100-sxm"): 8, ("dc-a", "h20"): 4, ("dc-b", "h20"): 8, ("dc-b", "h100-sxm"): 3},
        rate_ceiling=3.0,
        mode=mode,
    )
    return replace(data, **changes)


def intra_problem(**changes: Any) -> milp.ProblemData:
    """pd-intra over two datacenters, two GPU types in dc-a."""
    p0 = candidate("dc-a", "h100-sxm", 1, 3.0, 4)
    p1 = candidate("dc-b", "h20", 1, 1.5, 4)
    d0 = candidate("dc-a", "h100-sxm", 2, 6.0, 3)
    d1 = candidate("dc-a", "h20", 1, 1.0, 4)
    d2 = candidate("dc-b", "h20", 2, 3.0, 4)
    data = milp.ProblemData(
        architecture=architectures.get("pd-intra"),
        prefill=[p0, p1],
        prefill_caps={(0, 0): np.array([1.0, 2.1, 3.0, 3.9]), (1, 1): np.array([0.4, 0.9, 1.3, 1.8])},
        decode=[decoder(d0, 1.5, 80.0), decoder(d1, 5.0, 80.0), decoder(d2, 0.8, 80.0)],
        relay=[],
        pools=[RDMA_PATH, RDMA_PATH],
        datacenters=["dc-a", "dc-b"],
        decode_cache_bytes_per_rps=0.0,
        mean_output_tokens=300.0,
        inventory={("dc-a", "h100-sxm"): 12, ("dc-b", "h20"): 12, ("dc-a", "h20"): 4},
        rate_ceiling=2.0,
        mode="rate",
        target_rate=2.0,
    )
    return replace(data, **changes)


def _pulp(name: str) -> str:
    """PuLP spells '-' in constraint names as '_'."""
    return name.replace("-", "_")


def expected_names(data: milp.ProblemData, variables: milp.Variables) -> set[str]:
    """Every constraint the module docstrings document, for this instance."""
    names = {"one-pool", "served-rate", "one-prefill-pool", "one-decode-kind", "decode-capacity"}
    names |= {f"pool-rate-{k}" for k in range(len(data.pools))}
    names |= {f"prefill-capacity-{k}" for k in range(len(data.pools))}
    names |= {f"prefill-location-{c}-{n}" for c, n in variables.prefill}
    if data.prefill_cache_bytes_per_rps > 0 and data.prefill_cache_room:
        names.add("prefill-cache")
    for d, cap in enumerate(data.decode):
        if cap.usable:
            names |= {f"decode-pick-{d}", f"decode-location-{d}", f"decode-memory-{d}"}
            if data.decode_cache_bytes_per_rps > 0:
                names.add(f"decode-cache-{d}")
            if data.architecture.decode_gpu is DecodeGpu.SAME:
                names.add(f"homogeneous-{d}")
            elif data.architecture.decode_gpu is DecodeGpu.OTHER:
                names.add(f"heterogeneous-{d}")
    if data.architecture.has_relay:
        names |= {"one-relay-kind", "relay-capacity"}
        for r, cap in enumerate(data.relay):
            if cap.usable:
                names |= {f"relay-pick-{r}", f"relay-nonempty-{r}", f"relay-location-{r}"}
    names |= {f"wan-bandwidth-{k}" for k, load in enumerate(data.pools) if load.line is not None}
    names |= {f"inventory-{dc}-{gpu}" for dc, gpu in data.inventory}
    if data.budget_per_hour is not None:
        names.add("budget")
    if data.mode == "rate":
        names.add("target-rate")
    else:
        names.add("offered-rate")
        if data.mode == "bcr" and data.min_served_fraction > 0:
            names.add("min-served-rate")
    return {_pulp(name) for name in names}


@pytest.mark.parametrize(
    "data",
    [
        pdd_problem("bcr"),
        pdd_problem("budget", budget_per_hour=40.0),
        pdd_problem("rate", target_rate=2.0),
        pdd_problem("bcr", min_served_fraction=0.0),
        replace(pdd_problem("rate", target_rate=2.0), architecture=architectures.get("pd-cross"), relay=[]),
        intra_problem(),
        intra_problem(architecture=architectures.get("pd-hetero")),
    ],
    ids=["pdd-bcr", "pdd-budget", "pdd-rate", "pdd-bcr-floor0", "pd-cross-rate", "pd-intra-rate", "pd-hetero-rate"],
)
def test_constraints_are_named_as_documented(data: milp.ProblemData) -> None:
    model, variables = milp.build(data)
    names = [constraint.name for constraint in model.constraints()]  # PuLP 4 API: a list
    assert len(names) == len(set(names))
    assert set(names) == expected_names(data, variables)
    for family in ("one_pool", "prefill_capacity_", "decode_capacity", "decode_memory_", "inventory_"):
        assert any(name.startswith(family) for name in names), family
    if data.architecture.uses_wan:
        assert any(name.startswith("wan_bandwidth_") for name in names)
    if data.architecture.has_relay:
        assert "relay_capacity" in names


def test_elastic_adds_one_slack_per_family() -> None:
    data = pdd_problem("rate", target_rate=3.0, elastic=True, budget_per_hour=30.0)
    _, variables = milp.build(data)
    assert set(variables.slack) == {
        "prefill-capacity",
        "decode-capacity",
        "decode-memory",
        "prefill-cache",
        "relay-capacity",
        "wan-bandwidth",
        "inventory",
        "budget",
    }
    _, plain = milp.build(replace(data, elastic=False))
    assert plain.slack == {}


@pytest.mark.parametrize(
    ("data", "brute"),
    [
        (pdd_problem("rate", target_rate=2.0), brute_rate),
        (pdd_problem("rate", target_rate=3.0), brute_rate),
        (intra_problem(), brute_rate),
        (intra_problem(target_rate=1.2), brute_rate),
        (
            replace(pdd_problem("rate", target_rate=2.0), architecture=architectures.get("pd-cross"), relay=[]),
            brute_rate,
        ),
        (intra_problem(architecture=architectures.get("pd-hetero")), brute_rate),
    ],
)
def test_hand_made_rate_instances(data: milp.ProblemData, brute: Any) -> None:
    expected = brute(data)
    assert expected is not None
    solution = solve_mode(data)
    assert solution is not None
    check_solution(data, solution)
    assert close(solution.cost_per_hour, expected)


def test_pd_intra_keeps_decode_on_the_prefill_gpu() -> None:
    """dc-a's h20 decoders are the cheapest per request/s, but pd-intra is homogeneous: with an
    h100 prefill pool it must decode on h100."""
    data = intra_problem()
    solution = solve_mode(data)
    assert solution is not None
    c, _ = solution.prefill
    assert solution.decode is not None
    d, _ = solution.decode
    assert data.prefill[c].gpu == data.decode[d].candidate.gpu
    assert data.prefill[c].datacenter == data.decode[d].candidate.datacenter


def test_pd_hetero_moves_decode_to_another_gpu() -> None:
    """The same instance under pd-hetero: decode must run on another GPU type than prefill, in the
    same datacenter, so dc-a's h100 prefill pool decodes on dc-a's h20 (dc-b offers no other type)."""
    data = intra_problem(architecture=architectures.get("pd-hetero"))
    solution = solve_mode(data)
    assert solution is not None
    c, _ = solution.prefill
    assert solution.decode is not None
    d, _ = solution.decode
    assert data.prefill[c].gpu != data.decode[d].candidate.gpu
    assert data.prefill[c].datacenter == data.decode[d].candidate.datacenter
    assert (data.prefill[c].gpu, data.decode[d].candidate.key) == ("h100-sxm", data.decode[1].candidate.key)
    homogeneous = solve_mode(intra_problem())
    assert homogeneous is not None
    assert solution.cost_per_hour < homogeneous.cost_per_hour  # the cheap h20 decoder is now allowed


def test_budget_mode_serves_less_when_the_budget_binds() -> None:
    full = solve_mode(pdd_problem("rate", target_rate=3.0))
    assert full is not None
    tight = pdd_problem("budget", budget_per_hour=full.cost_per_hour * 0.6)
    solution = solve_mode(tight)
    expected = brute_budget(tight)
    assert solution is not None and expected is not None
    assert solution.rate < 3.0
    assert solution.cost_per_hour <= full.cost_per_hour * 0.6 + 1e-7
    assert close(solution.rate - 1e-6 * solution.cost_per_hour, expected[0])
    roomy = solve_mode(pdd_problem("budget", budget_per_hour=full.cost_per_hour * 1.5))
    assert roomy is not None
    assert close(roomy.rate, 3.0)
    assert close(roomy.cost_per_hour, full.cost_per_hour)  # the tie-breaker picks the cheapest


def test_wan_bandwidth_caps_the_pool_rate() -> None:
    """Pool 0 carries at most 2.5 req/s: at 3 req/s only the dearer line pool 1 is possible."""
    data = pdd_problem("rate", target_rate=3.0)
    solution = solve_mode(data)
    assert solution is not None
    assert solution.pool == 1
    cheap = solve_mode(pdd_problem("rate", target_rate=2.0))
    assert cheap is not None
    assert close(cheap.cost_per_hour, brute_rate(pdd_problem("rate", target_rate=2.0)))  # type: ignore[arg-type]


def test_infeasible_program_reports_infeasible() -> None:
    data = pdd_problem("rate", target_rate=3.0, inventory={("dc-a", "h100-sxm"): 1, ("dc-a", "h20"): 1})
    assert brute_rate(data) is None
    assert solve_mode(data) is None


# -- what the program chooses among (pddplan.optimize.candidates) ------------------------------------------
def test_instance_candidates_follow_the_offers() -> None:
    from pddplan.optimize.candidates import instance_candidates, tp_degrees
    from pddplan.perf.memory import fits
    from pddplan.scenarios.scenario import gpu_price

    for name in ("pdd-agent-64k", "chat-short-lowhit"):
        workload = load_workload(name)
        model = load_model(workload.model, workload.kv_dtype)
        chunk = workload.serving.chunk_tokens
        found = instance_candidates(load_input_set(workload), chunk)
        assert found
        offers = {(dc.name, offer.type): offer for dc in workload.deployment.datacenters for offer in dc.gpus}
        for cand in found:
            offer = offers[(cand.datacenter, cand.gpu)]
            hardware = load_hardware(cand.gpu)
            width = cand.gpus_per_instance
            assert width in tp_degrees(workload, hardware.scale_up_domain)
            assert width <= offer.max_count
            assert cand.max_count == offer.max_count // width
            assert cand.usd_per_hour == pytest.approx(width * gpu_price(hardware, workload, cand.datacenter))
            assert fits(cand.instance, workload.serving.hbm_utilization, chunk)
            # pipeline stages: a dense model's, one scale-up domain of TP each
            assert cand.pp == 1 or (model.moe is None and cand.tp == hardware.scale_up_domain)
            layout = ("/ep" if cand.instance.uses_ep else "") + ("/tp-attention" if cand.tp_attention else "")
            stages = f"/pp{cand.pp}" if cand.pp > 1 else ""
            assert cand.key == f"{cand.datacenter}/{cand.gpu}/tp{cand.tp}{stages}{layout}"
            # an MoE model's candidate says its layout outright; a dense model's leaves the default
            assert cand.expert_parallel == (cand.instance.uses_ep if model.moe is not None else None)
            assert cand.tp_attention == cand.instance.tp_attention
        if workload.deployment.tp_options:
            assert {c.gpus_per_instance for c in found} <= set(workload.deployment.tp_options)
        keys = [c.key for c in found]
        assert len(keys) == len(set(keys))
        # an MoE model on more than one GPU tries, each where it fits: inside one scale-up domain TP,
        # EP with data-parallel attention and EP under tensor-parallel attention; across domains the
        # two EP layouts (EP is the default there); a dense model or a single GPU only the default
        for cand in found:
            hardware = load_hardware(cand.gpu)
            layouts = {
                (c.instance.uses_ep, c.tp_attention)
                for c in found
                if (c.datacenter, c.gpu, c.tp) == (cand.datacenter, cand.gpu, cand.tp)
            }
            if model.moe is not None and cand.tp > 1:
                tried = [(True, False), (True, True)]
                if cand.tp <= hardware.scale_up_domain:
                    tried.append((False, False))
                for ep, tp_attention in tried:
                    fits_it = fits(
                        Instance(model, hardware, cand.tp, ep, tp_attention=tp_attention),
                        workload.serving.hbm_utilization,
                        chunk,
                    )
                    assert ((ep, tp_attention) in layouts) == fits_it, (cand.key, ep, tp_attention)
                assert layouts <= set(tried)
            else:
                assert layouts == {(cand.instance.uses_ep, False)}
    every = {c.key for c in instance_candidates(load_input_set(load_workload("pdd-agent-64k")), 8192)}
    assert {"dc-b/gpu-b/tp8", "dc-b/gpu-b/tp8/ep", "dc-b/gpu-b/tp8/ep/tp-attention"} <= every


def test_candidates_leave_out_tensor_parallel_widths_that_do_not_divide_the_heads() -> None:
    """MiniMax-M2 has 48 attention heads: of the widths tried (powers of two up to 64), tensor-
    parallel attention runs only where 48 splits evenly (up to 16, not 32 or 64); data-parallel
    attention (each rank every head) is tried at 32 and 64 too."""
    from pddplan.optimize.candidates import instance_candidates

    workload = load_workload("pdd-agent-64k").model_copy(update={"model": "minimax-m2"})
    found = instance_candidates(load_input_set(workload, workload_dir("pdd-agent-64k")), 8192)
    tensor_parallel = {c.tp for c in found if not c.instance.uses_dp_attention}
    assert tensor_parallel and all(48 % tp == 0 for tp in tensor_parallel)
    assert 16 in tensor_parallel and not {32, 64} & tensor_parallel
    assert {c.tp for c in found if c.instance.uses_dp_attention} >= {32, 64}


def test_widths_that_split_no_heads_are_named_as_the_reason_nothing_fits() -> None:
    """qwen3-32b fits one H200 at any width, but tp_options 3 and 6 divide none of its 64 heads:
    the infeasibility says so, not that the model is too large."""
    from pddplan.optimize import optimize_architecture

    workload = load_workload("qwen3-32b-h200-isl16k")
    narrowed = workload.model_copy(update={"deployment": workload.deployment.model_copy(update={"tp_options": [3, 6]})})
    inputs = load_input_set(narrowed, workload_dir("qwen3-32b-h200-isl16k"))
    result = optimize_architecture(inputs, "pd-intra", OptimizeOptions(verify=False))
    assert not result.feasible
    message = result.infeasibility[0]["message"]
    assert "tensor-parallel attention over 3 or 6 ranks does not split its 64 attention heads" in message


def test_tp_degrees_default_to_powers_of_two_up_to_eight_domains() -> None:
    from pddplan.optimize.candidates import tp_degrees

    workload = load_workload("chat-short-lowhit")
    assert workload.deployment.tp_options is None or not workload.deployment.tp_options
    assert tp_degrees(workload, 8) == [1, 2, 4, 8, 16, 32, 64]
    assert tp_degrees(workload, 4) == [1, 2, 4, 8, 16, 32]
    narrowed = workload.model_copy(
        update={"deployment": workload.deployment.model_copy(update={"tp_options": [16, 8]})}
    )
    assert tp_degrees(narrowed, 8) == [8, 16]


def test_wan_configs_enumerate_every_nonempty_line_combination() -> None:
    from pddplan.net.lines import HOURS_PER_MONTH

    workload = load_workload("pdd-agent-64k")
    pools = wan_configs(load_input_set(workload, workload_dir("pdd-agent-64k")))
    options = workload.deployment.wan_lines
    per_direction = math.prod(option.max_lines + 1 for option in options) - 1
    assert len(pools) == 2 * per_direction
    assert len({pool.key for pool in pools}) == len(pools)
    for pool in pools:
        assert pool.source != pool.target and pool.lines >= 1
        assert pool.gbps == pytest.approx(sum(o.capacity_gbps * n for o, n in pool.leases))
        assert pool.usd_per_hour == pytest.approx(sum(o.usd_per_month * n for o, n in pool.leases) / HOURS_PER_MONTH)
        assert all(1 <= n <= o.max_lines for o, n in pool.leases)


def test_every_moe_layout_may_prefill_and_a_lone_prompt_pays_its_one_rank() -> None:
    """Kimi-K2 on B200: tp8 comes in three layouts (TP; EP with data-parallel attention; EP under
    tensor-parallel attention), tp16 in two; each may prefill, since the step model puts a lone
    request's attention and dense layers on one rank under data-parallel attention (`dp_rank_share`),
    which makes that layout's lone prefill the slowest of the three."""
    from pddplan.optimize.candidates import instance_candidates
    from pddplan.optimize.problem import ProblemBuilder, build_setup
    from pddplan.perf.roofline import prefill_cost

    workload = load_workload("coding-agent-128k")
    found = {c.key: c for c in instance_candidates(load_input_set(workload), workload.serving.chunk_tokens)}
    tp8 = ["dc-a/b200/tp8", "dc-a/b200/tp8/ep", "dc-a/b200/tp8/ep/tp-attention"]
    assert {*tp8, "dc-a/b200/tp16/ep", "dc-a/b200/tp16/ep/tp-attention"} <= set(found)
    setup = build_setup(
        load_input_set(workload, workload_dir("coding-agent-128k")), "pd-intra", workload.arrival.rate_rps
    )
    data = ProblemBuilder(setup, OptimizeOptions()).build(None)
    keys = {setup.candidates[c].key for c, _ in data.prefill_caps}
    assert set(tp8) <= keys
    lone = [float(prefill_cost(found[k].instance, 8192, 0, None).alone_s) for k in tp8]
    assert lone[1] > max(lone[0], lone[2])
