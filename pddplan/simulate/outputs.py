"""What `simulate --json` prints: the simulation's figures, in the closed form's names."""

from __future__ import annotations

from pydantic import Field

from pddplan.evaluate.outputs import Figures
from pddplan.support.outputs import Output


class ShareCheck(Output):
    """The share of requests over one SLA target, its 99% batch-means interval and what the SLA
    allows (`pddplan.simulate.sequential`)."""

    metric: str
    target_s: float
    allowed_share: float
    observed_share: float
    interval: list[float] = Field(description="[low, high]")


class Sequential(Output):
    """The early-stopping check of a verification: the requests its decision rests on."""

    requests_requested: int
    requests_simulated: int
    stopped_early: bool
    shares: list[ShareCheck]


class Simulation(Figures):
    """`simulate --json`; also an architecture's `simulated` in `optimize --json`."""

    requests: int
    requests_summarized: int
    cancelled_transfers: int
    sequential: Sequential | None = Field(default=None, description="the early-stopping check's intervals")
