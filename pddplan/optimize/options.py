"""How to optimize: the objective, the verification and the solver (shared by search and diagnosis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pddplan.errors import InputError
from pddplan.optimize.solver import SolverOptions
from pddplan.support.limits import check_budget, check_jobs, check_rate, check_requests, check_seed

# bcr: most goodput per dollar; rate: cheapest plan for a rate; budget: most goodput for a budget.
Mode = Literal["bcr", "rate", "budget"]
MODES: tuple[Mode, ...] = ("bcr", "rate", "budget")
# where a relay decodes: its own instances, the prefill instances (mixed steps), or whichever is better
RelayPlacement = Literal["auto", "dedicated", "prefill"]
RELAY_PLACEMENTS: tuple[RelayPlacement, ...] = ("auto", "dedicated", "prefill")
#: fewer simulated requests than this cannot resolve a P99 TTFT: the verification would be noise
MIN_VERIFY_REQUESTS = 100
#: the most plans `optimize --top` lists per architecture: each is a closed-form evaluation the
#: search made anyway, or one of at most MAX_TOP - 1 more solves of the program (none simulated)
MAX_TOP = 20


def check_top(top: int) -> int:
    """`top`, or InputError when it is not a whole number from 1 to MAX_TOP."""
    if not 1 <= top <= MAX_TOP:
        raise InputError(f"--top = {top}: expected a whole number from 1 to {MAX_TOP}")
    return top


@dataclass(frozen=True)
class OptimizeOptions:
    """How to optimize."""

    mode: Mode = "bcr"
    rate: float | None = None
    budget_per_hour: float | None = None
    min_served_fraction: float = 1.0
    solver: SolverOptions = field(default_factory=SolverOptions)
    verify_requests: int = 10_000
    seed: int = 0
    verify: bool = True
    #: stop a verification simulation after its first quarter when the SLA intervals are conclusive
    early_stop: bool = True
    #: architectures optimized at once, one worker process each (None: one per CPU)
    jobs: int | None = None
    relay_placement: RelayPlacement = "auto"
    #: list this many best plans per architecture and their cost-latency frontier (None: only the best)
    top: int | None = None
    #: say which constraints bind where an architecture has no feasible plan (`pddplan.optimize.diagnose`,
    #: a search of its own); off where nobody reads it (the gate records the best plan's figures only)
    diagnose: bool = True

    def __post_init__(self) -> None:
        self._check_mode()
        if self.relay_placement not in RELAY_PLACEMENTS:
            raise InputError(f"--relay = {self.relay_placement!r}: expected one of {', '.join(RELAY_PLACEMENTS)}")
        if self.rate is not None:
            check_rate(self.rate)
        if not 0 <= self.min_served_fraction <= 1:
            raise InputError(f"--min-served = {self.min_served_fraction}: must be in [0, 1]")
        check_requests(self.verify_requests)
        if self.verify_requests < MIN_VERIFY_REQUESTS:
            raise InputError(
                f"--requests = {self.verify_requests}: verify with at least {MIN_VERIFY_REQUESTS} requests"
            )
        check_seed(self.seed)
        if self.jobs is not None:
            check_jobs(self.jobs)
        if self.top is not None:
            check_top(self.top)

    def _check_mode(self) -> None:
        """The mode follows from what is given, as on the command line: a `rate` makes the default
        bcr mode rate, a `budget_per_hour` budget; a mode without its figure, both figures, or an
        unknown mode are refused."""
        if self.mode not in MODES:
            raise InputError(f"mode = {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.rate is not None and self.budget_per_hour is not None:
            raise InputError("give a rate or a budget, not both")
        if self.budget_per_hour is not None:
            check_budget(self.budget_per_hour, "budget_per_hour")
        if self.mode == "bcr" and (self.rate is not None or self.budget_per_hour is not None):
            object.__setattr__(self, "mode", "rate" if self.rate is not None else "budget")
        if self.mode == "rate" and self.rate is None:
            raise InputError("mode 'rate' plans the cheapest deployment for a rate: give the rate (--rate)")
        if self.mode == "budget" and self.budget_per_hour is None:
            raise InputError("mode 'budget' plans the most goodput for a budget: give the budget (--budget)")

    def least_rate(self, rate_ceiling: float) -> float:
        """The least rate a plan may serve: the target (--rate), min_served x offered (BCR), else 0."""
        if self.mode == "rate":
            return rate_ceiling
        if self.mode == "bcr":
            return self.min_served_fraction * rate_ceiling
        return 0.0
