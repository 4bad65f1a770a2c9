"""The base of every command's typed result: what its `--json` prints and its published schema.

Conventions the results hold to: one meaning per name across commands (`bcr` is always a plan's
goodput per dollar at its rate; a capacity view's is `fluid_bcr`); money carries its unit
(`cost_usd_per_hour`, `revenue_per_request_usd`); seconds end in `_s`, rates in `_rps`; counts are
integers; a figure with no value (an infeasible plan's cost, an infinite tail) is null, never 0;
display strings are values, not keys (`pipelines` is a list with a `pipeline` field). Keys that are
names (roles, architectures, GPU types) are identifiers, as in the input files. Each command's type
lives with the layer that computes it; `pddplan.report.schemas` lists them by command.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Output(BaseModel):
    """An output object: every key named here, no other."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    def json_data(self) -> dict[str, Any]:
        """The object as `--json` prints it: the keys that were set, in the declared order."""
        return self.model_dump(exclude_unset=True)


Seconds = float | None  # null when infinite (an unstable stage)


def number(value: float | None) -> float:
    """A result's figure for arithmetic: nan where the result prints null (an infinite tail)."""
    return float("nan") if value is None else value
