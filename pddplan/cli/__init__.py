"""The `pddplan` command line: parse options, call the library, render the result.

Nothing here computes: every command is a call into the library, imported inside the command so
that `pddplan --help` starts instantly. One module per group of commands (`browse`, `traces`,
`calibration`, `deploy`, `planning`, `studies`), the shared options in `options`, the applications
and the one-line errors in `apps`. Exit codes: 0 ok, 1 gate failed, 2 bad input, 3 infeasible.
"""

from __future__ import annotations

import gc
import importlib
import signal
import sys

from pddplan.cli.apps import app

#: the command modules, in the order `pddplan --help` lists their commands; each registers its
#: commands with the app when imported (they import the library inside each command)
COMMAND_MODULES = ("planning", "deploy", "studies", "traces", "calibration", "browse")
for _module in COMMAND_MODULES:
    importlib.import_module(f"pddplan.cli.{_module}")

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point. SIGTERM exits through Python's unwinding (exit 143), so an
    interrupted write removes its temporary file as it does on Ctrl-C."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        app()
    finally:
        # The process ends here: its objects need no cyclic collection on the way out. Frozen, the
        # interpreter's last collection skips them (60 ms of an optimize's wall time otherwise).
        gc.freeze()
