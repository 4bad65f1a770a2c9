"""The optimizer: each architecture's best plan, verified (`optimize`), and the meta-problems on
it: one purchase for a day's scenarios (`robust_optimize`), and the modules `robustness` and
`survive`, whose verbs bear their names.

Its verbs, imported on first use (`pddplan.support.lazy`):
    optimize               pddplan.optimize.run
    optimize_variants      pddplan.optimize.run
    optimize_each          pddplan.optimize.run
    optimize_architecture  pddplan.optimize.search
    robust_optimize        pddplan.optimize.robust
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "optimize": "pddplan.optimize.run",
        "optimize_variants": "pddplan.optimize.run",
        "optimize_each": "pddplan.optimize.run",
        "optimize_architecture": "pddplan.optimize.search",
        "robust_optimize": "pddplan.optimize.robust",
    },
)
