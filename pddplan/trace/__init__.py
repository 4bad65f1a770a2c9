"""Request traces: read as streams (`read`), summarized (`stats`), replayed through prefix caches.

Its verbs, imported on first use (`pddplan.support.lazy`):
    read_trace    pddplan.trace.read
    summarize     pddplan.trace.stats
    cache_curve   pddplan.trace.curve
    replay_tiers  pddplan.trace.tiers
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "read_trace": "pddplan.trace.read",
        "summarize": "pddplan.trace.stats",
        "cache_curve": "pddplan.trace.curve",
        "replay_tiers": "pddplan.trace.tiers",
    },
)
