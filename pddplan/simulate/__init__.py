"""Request-level simulation of a deployment (see `engine`), and its summary.

Its verbs, imported on first use (`pddplan.support.lazy`):
    simulate           pddplan.simulate.summary
    simulate_requests  pddplan.simulate.engine
    verify             pddplan.simulate.sequential
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "simulate": "pddplan.simulate.summary",
        "simulate_requests": "pddplan.simulate.engine",
        "verify": "pddplan.simulate.sequential",
    },
)
