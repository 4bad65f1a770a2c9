"""The closed form: a deployment's TTFT/TPOT tails, goodput, cost and BCR (`evaluate`); its
capacities are the module `capacity_view`'s verb of that name.

Its verbs, imported on first use (`pddplan.support.lazy`):
    evaluate  pddplan.evaluate.analytic
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "evaluate": "pddplan.evaluate.analytic",
    },
)
