"""Keep the BLAS libraries that numpy and scipy load single-threaded in pddplan's processes.

pddplan's arrays are small (thousands of elements, no large matrix products), so a BLAS thread
pool buys nothing; it does make forking unsafe. The optimizer forks one worker per architecture,
and OpenBLAS 0.3.30-0.3.31 (in the newest numpy and scipy wheels) can deadlock across a fork
(OpenMathLib/OpenBLAS#5520, numpy/numpy#30092): a CI run hung on it. OpenBLAS reads its thread
count once, when it loads, so this must run before numpy is first imported: `pddplan/__init__.py`
runs it, so that the command line and a script that imports pddplan before numpy both get their
workers. A value the user set is kept, and a script that imported numpy first keeps numpy's pool;
the optimizer then sees the extra threads and runs its architectures one after another.
"""

from __future__ import annotations

import os

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_blas() -> None:
    """Set each of BLAS_THREAD_VARIABLES to 1 unless it is set already."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
