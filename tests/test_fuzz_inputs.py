"""The mutation fuzz of tests/fuzz_inputs.py, run in a child process under a memory limit
(RLIMIT_AS, what `ulimit -v` sets) and a wall-clock limit: a mutated file that makes pddplan
allocate without bound fails with MemoryError inside the limit, one that makes it loop fails on the
timeout, and one that makes it crash fails on the driver's checks."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: address space of the child: pddplan with numpy, scipy and HiGHS loaded maps ~1 GB; a runaway
#: allocation (a million histogram bins, /dev/zero read whole) goes far beyond 3 GiB
ADDRESS_SPACE_BYTES = 3 * 1024**3
#: mutated files per target (workload, plan, GPU profile): ~10 s on a 2-core machine
EXAMPLES_PER_TARGET = 60
#: the whole run, three targets (~10 s when idle): a mutated file that makes pddplan loop ends here
WALL_CLOCK_S = 600


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def test_mutated_inputs_end_in_exit_0_2_or_3_within_time_and_memory_bounds() -> None:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fuzz_inputs.py"), str(EXAMPLES_PER_TARGET)],
        cwd=ROOT,
        env=env,
        preexec_fn=_limit_memory,
        capture_output=True,
        text=True,
        timeout=WALL_CLOCK_S,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    assert run.stdout.count("every run ended as promised") == 3, run.stdout
