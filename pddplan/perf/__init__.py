"""The step-time model: pure functions of an instance (a model on GPUs) and a step's tokens.

Its verbs, imported on first use (`pddplan.support.lazy`):
    Instance            pddplan.perf.roofline
    step_time           pddplan.perf.roofline
    prefill_time        pddplan.perf.roofline
    decode_step_time    pddplan.perf.roofline
    moe_step            pddplan.perf.moe
    request_kv_bytes    pddplan.perf.kv
    kv_bytes_per_token  pddplan.perf.kv
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "Instance": "pddplan.perf.roofline",
        "step_time": "pddplan.perf.roofline",
        "prefill_time": "pddplan.perf.roofline",
        "decode_step_time": "pddplan.perf.roofline",
        "moe_step": "pddplan.perf.moe",
        "request_kv_bytes": "pddplan.perf.kv",
        "kv_bytes_per_token": "pddplan.perf.kv",
    },
)
