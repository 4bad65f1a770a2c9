"""Performance core: `pddplan estimate` answers in well under a second; the model functions take
numpy arrays, so a sweep of thousands of points costs milliseconds.

    python benchmarks/bench_perf.py
"""

from __future__ import annotations

import itertools

import numpy as np
from _timing import repeat, report, run_cli

from pddplan.inputs import load_hardware, load_model
from pddplan.perf.roofline import Instance, decode_step_time, prefill_time


def main() -> None:
    ok = report(
        "pddplan estimate (CLI process, prefill 6400 on 58000)",
        repeat(
            lambda: run_cli(
                "estimate",
                "--model",
                "deepseek-v3.2",
                "--gpu",
                "gpu-a",
                "--tp",
                "16",
                "--prefill",
                "6400",
                "--cached",
                "58000",
                "--chunk",
                "8192",
            ),
            5,
        ),
        1.0,
    )
    instance = Instance(load_model("deepseek-v3.2", "fp8"), load_hardware("gpu-a"), 16)
    new = np.linspace(100, 64_000, 5000)
    cached = 64_512 - new
    # step times are kept by their arguments' content: each run asks new ones (one more cached token)
    shift = itertools.count()
    ok &= report(
        "prefill_time over 5,000 points (chunked)",
        repeat(lambda: prefill_time(instance, new, cached + next(shift), 8192), 20),
        0.05,
    )
    batches = np.arange(1, 5001, dtype=float)
    ok &= report(
        "decode_step_time over 5,000 batch sizes",
        repeat(lambda: decode_step_time(instance, batches, 32_000 + next(shift)), 20),
        0.01,
    )
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
