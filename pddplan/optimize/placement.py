"""Where a PDD plan's relay decodes: the plans to compare for one sized or solved plan, a dedicated
relay against the relay on the prefill instances (`pddplan.perf.mixed`), shared by the optimizer's
search and fast sizing."""

from __future__ import annotations

import math

from pddplan.optimize.options import RelayPlacement
from pddplan.specs.plan import Plan

COLOCATED_EXTRA_PREFILL = 1


def relay_placements(plan: Plan, placement: RelayPlacement = "auto") -> list[list[Plan]]:
    """The plans to compare for `plan`'s relay, in groups ordered by cost. A dedicated relay as the
    program sized it and, unless `placement` is dedicated, the relay on the prefill instances
    with 0 up to ceil(relay GPUs / prefill TP) more of them to carry its tokens (more would cost more
    than the relay they replace). A relay the program put on prefill: with 0 up to
    COLOCATED_EXTRA_PREFILL more prefill instances (the program leaves out how much the relay's
    tokens slow prefill). With `placement` prefill, only the relay on prefill. Plans without a
    relay come back unchanged."""
    relay, prefill = plan.relay, plan.prefill
    if plan.relay_on_prefill:  # the program's room for the relay: prefill's slow-down is not in it
        extra = range(COLOCATED_EXTRA_PREFILL + 1)
    elif relay is None or relay.count == 0 or placement == "dedicated":
        return [[plan]]
    else:
        extra = range(math.ceil(relay.gpus / prefill.gpus_per_instance) + 1)
    colocated = [
        plan.model_copy(
            update={
                "relay": None,
                "relay_on_prefill": True,
                "prefill": prefill.model_copy(update={"count": prefill.count + k}),
            }
        )
        for k in extra
    ]
    return [colocated] if plan.relay_on_prefill or placement == "prefill" else [[plan], colocated]
