"""Checks on what a `pddplan` command run through typer's CliRunner printed."""

from __future__ import annotations

import json
from typing import Any


def one_error_line(result: Any, *fragments: str, code: int = 2) -> str:
    """The run failed with `code`, printed nothing on stdout and one `error: ...` line on stderr
    that contains every fragment; returns that line."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return str(lines[0])


def json_of(result: Any) -> Any:
    """The run succeeded with only JSON on stdout and nothing on stderr; returns the parsed JSON."""
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def human_of(result: Any) -> str:
    """The run succeeded with its tables on stdout and no error or warning on stderr; returns stdout.

    stderr may hold only notices of files written ("wrote PATH") and the gate's hints.
    """
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip()
    for line in result.stderr.splitlines():
        assert line.startswith(("wrote ", "updated ", "results improved")), result.stderr
    return str(result.stdout)
