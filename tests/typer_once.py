"""typer's CliRunner, without rebuilding the command tree on every call.

typer's CliRunner.invoke calls typer.main.get_command(app) each time, which rebuilds every
command's parameters from its signature (typing.get_type_hints on each): 60 ms of the ~80 ms a
bad-input catalog case took, over a thousand times a run (and 300 times in the fuzz's child
process). The tree does not change while tests run, so `install_command_cache` makes typer.testing
build it once per app. `_get_command` is the name typer.testing calls it by from 0.26 (the oldest
typer pyproject.toml allows) on. One environment variable is read while the tree is built (whether
--show-completion detects the shell), so a test that sets it gets a tree of its own.
"""

from __future__ import annotations

import os
from typing import Any

import typer.testing

_build_command = typer.testing._get_command  # type: ignore[attr-defined]  # typer's private builder
_commands: dict[tuple[int, str | None], tuple[Any, Any]] = {}


def _command_built_once(typer_app: Any) -> Any:
    key = (id(typer_app), os.environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"))
    if key not in _commands:
        _commands[key] = (typer_app, _build_command(typer_app))  # the app kept: its id stays its own
    return _commands[key][1]


def install_command_cache() -> None:
    """Make typer.testing's CliRunner build each app's click command tree once."""
    typer.testing._get_command = _command_built_once  # type: ignore[attr-defined, assignment]
