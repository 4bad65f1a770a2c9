"""The studies built on optimize (each a module of its own, independent of the others:
`agreement`, `bathtub`, `cache_plan`, `gate`, `paper`, `sensitivity`, `sweep`, `whatif`; each
module's verb bears its name, `paper`'s is `compare`).

Its verbs, imported on first use (`pddplan.support.lazy`):
    compare  pddplan.analyses.paper
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "compare": "pddplan.analyses.paper",
    },
)
