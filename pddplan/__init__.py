"""pddplan: capacity planning and cost modeling for cross-datacenter PDD LLM serving.

The commands are library calls too (loaded on first use, so `import pddplan` stays instant):
`optimize_workload`, `evaluate_plan`, `simulate_plan`, `scenario_of` (see `pddplan.api`) and the
readers `load_workload`, `load_plan`, `load_hardware`, `load_model` (see `pddplan.inputs`).
"""

from __future__ import annotations

import importlib
from typing import Any

from pddplan.support.blas import single_threaded_blas

# First, before numpy loads (a script's `from pddplan.x import y` runs this file before x): a BLAS
# thread pool would make forking unsafe, and every search and simulation a library call farms out
# would run one after another in the calling process (pddplan/support/blas.py).
single_threaded_blas()

__version__ = "0.1.0"

_EXPORTS = {
    "optimize_workload": "pddplan.api",
    "evaluate_plan": "pddplan.api",
    "simulate_plan": "pddplan.api",
    "scenario_of": "pddplan.api",
    "load_workload": "pddplan.inputs",
    "load_plan": "pddplan.inputs",
    "load_hardware": "pddplan.inputs",
    "load_model": "pddplan.inputs",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pddplan' has no attribute {name!r}")
