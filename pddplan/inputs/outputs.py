"""What `hardware|models|workloads show|list --json` print."""

from __future__ import annotations

from pydantic import ConfigDict

from pddplan.support.outputs import Output


class Catalog(Output):
    """A catalog entry (`hardware|models|workloads show --json`, and each row of `list`)."""

    model_config = ConfigDict(extra="allow")
    name: str
