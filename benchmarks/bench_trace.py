"""`pddplan trace import` of a 1,000,000-request trace: at most 10 s and 1 GB (issue 14).

The trace is the shipped Mooncake synthetic trace resampled to 1,000,000 requests: requests drawn
with replacement (seed 0), timestamps kept increasing by drawing the inter-arrival gaps from the
trace's own, and each copy's block hashes offset by its draw index modulo 64 so that prefix
sharing stays realistic (copies share prefixes with their own kind, not with every other copy).
Peak memory is the import process's maximum resident set (getrusage of the child).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import ROOT

REQUESTS = 1_000_000
TARGET_S = 10.0
TARGET_BYTES = 1 << 30
SHIPPED = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"


def write_resampled(path: Path, requests: int, seed: int = 0) -> None:
    rows = [json.loads(line) for line in SHIPPED.read_text().splitlines() if line.strip()]
    times = np.array([r["timestamp"] for r in rows], dtype=np.float64)
    gaps = np.diff(np.sort(times))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(rows), requests)
    stamps = np.cumsum(rng.choice(gaps, requests))
    offset_blocks = 10_000_000
    with path.open("w") as out:
        for i, (pick, stamp) in enumerate(zip(picks.tolist(), stamps.tolist(), strict=True)):
            row = rows[pick]
            shift = (i % 64) * offset_blocks
            hashes = [h + shift for h in row["hash_ids"]]
            out.write(
                f'{{"timestamp": {int(stamp)}, "input_length": {row["input_length"]}, '
                f'"output_length": {row["output_length"]}, "hash_ids": {hashes}}}\n'
            )


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "resampled-1m.jsonl"
        write_resampled(trace, REQUESTS)
        size_mb = trace.stat().st_size / 1e6
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pddplan", "trace", "import", str(trace), "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        seconds = time.perf_counter() - start
        peak_bytes = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) * 1024
    ok = seconds <= TARGET_S and peak_bytes <= TARGET_BYTES
    print(
        f"pddplan trace import, {REQUESTS:,} requests ({size_mb:,.0f} MB of JSON lines): "
        f"{seconds:.2f} s (target <= {TARGET_S:g} s), peak RSS {peak_bytes / 2**20:,.0f} MiB "
        f"(target <= {TARGET_BYTES / 2**20:,.0f} MiB)  {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
