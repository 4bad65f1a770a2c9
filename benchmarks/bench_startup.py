"""Start-up: what a process pays before any work (issue 38). `pddplan --help` in <= 0.15 s, a
command's `--help` in <= 0.4 s (issue 34), and the import of what `optimize` loads to run (the
library and its views: pydantic models, numpy, scipy, PuLP, rich), reported as its own line since
every command pays its like.

    python benchmarks/bench_startup.py
"""

from __future__ import annotations

import subprocess
import sys

from _timing import ROOT, repeat, report, run_cli

#: what `pddplan optimize` imports beyond the command line itself
OPTIMIZE_IMPORTS = "import pddplan.optimize.command, pddplan.report.optimize_report"


def _python(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def main() -> None:
    ok = report("pddplan --help", repeat(lambda: run_cli("--help"), 9), 0.15)
    ok &= report("pddplan optimize --help", repeat(lambda: run_cli("optimize", "--help"), 9), 0.4)
    report("python: import what optimize runs on", repeat(lambda: _python(OPTIMIZE_IMPORTS), 9), None)
    report("python: start and exit (the floor)", repeat(lambda: _python("pass"), 9), None)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
