"""The errors pddplan raises on purpose, each mapped to one exit code.

Every error the user can cause is one of these; the CLI prints its message as one line and exits
with its code, never with a traceback.
"""

from __future__ import annotations


class PddplanError(Exception):
    """Base class: a problem pddplan reports to the user as one line."""

    exit_code = 1


class InputError(PddplanError):
    """Bad input: a missing or malformed file, a wrong field, an unknown name (exit code 2)."""

    exit_code = 2


class LayoutError(InputError):
    """An instance layout the serving engines refuse to start (a tensor-parallel width that does not
    divide the attention heads); the optimizer skips such widths, a plan that names one is bad input."""


class InfeasibleError(PddplanError):
    """No deployment meets the constraints; the message names the one that binds (exit code 3)."""

    exit_code = 3


class GateFailed(PddplanError):
    """A cost gate found a regression (exit code 1)."""

    exit_code = 1
