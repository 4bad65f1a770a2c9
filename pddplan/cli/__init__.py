"""The `pddplan` command line: parse options, call the library, render the result.

Nothing here computes: every command is a call into the library, imported inside the command so
that `pddplan --help` starts instantly. One module per group of commands (`browse`, `traces`,
`calibration`, `deploy`, `planning`, `studies`), the shared options in `options`, the applications
and the one-line errors in `apps`. Exit codes: 0 ok, 1 gate failed, 2 bad input, 3 infeasible.
"""

from __future__ import annotations

import copy
import functools
import gc
import importlib
import signal
import sys
from collections.abc import Sequence

import typer
from typer.main import get_command_name
from typer.models import CommandInfo

from pddplan.cli.apps import app

#: the command modules, in the order `pddplan --help` lists their commands; each registers its
#: commands with the app when imported (they import the library inside each command)
COMMAND_MODULES = ("planning", "deploy", "studies", "traces", "calibration", "browse")
for _module in COMMAND_MODULES:
    importlib.import_module(f"pddplan.cli.{_module}")

__all__ = ["app", "app_for", "main"]


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run `args` with: when they start with a command's or a group's name, the app with
    that one alone (typer builds the parser of every command it holds before it parses: 27 ms of
    every run for all of them, 5 ms for one); else (`--help`, a name no command has) the whole app.
    The command's parsing, help and errors are the same either way."""
    return _narrowed(args[0]) if args and not args[0].startswith("-") else app


@functools.cache
def _narrowed(name: str) -> typer.Typer:
    """The app with only the command or group `name` (the whole app when there is none); one per
    name, so that a caller keeping built command trees by app (typer's test runner) keeps it."""
    commands = [c for c in app.registered_commands if _name(c) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands, narrowed.registered_groups = commands, groups
    return narrowed


def _name(command: CommandInfo) -> str | None:
    """The name typer gives `command`: its own, else its function's, dashed."""
    if command.name:
        return command.name
    return get_command_name(command.callback.__name__) if command.callback is not None else None


def main() -> None:
    """Console-script entry point. SIGTERM exits through Python's unwinding (exit 143), so an
    interrupted write removes its temporary file as it does on Ctrl-C."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        app_for(sys.argv[1:])()
    finally:
        # The process ends here: its objects need no cyclic collection on the way out. Frozen, the
        # interpreter's last collection skips them (60 ms of an optimize's wall time otherwise).
        gc.freeze()
