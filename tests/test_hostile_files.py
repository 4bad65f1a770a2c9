"""Hostile files: a key given twice, an alias bomb, special files where a file is read or written.
Each is refused in one line with exit 2 (never a traceback, a hang, or a replaced device)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent
AGENT = (ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8")


def test_a_key_given_twice_is_refused(cli: object, tmp_path: Path) -> None:
    """The last of two `rate_rps` used to win silently (4 then 400 evaluated at 400)."""
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.replace("  rate_rps: 4.0\n", "  rate_rps: 4.0\n  rate_rps: 400.0\n", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "key 'rate_rps' appears twice")  # type: ignore[operator]


def test_an_alias_bomb_is_refused_at_the_first_alias(cli: object, tmp_path: Path) -> None:
    """Nine levels of nine aliases: 9^9 (387 million) leaves in about 400 bytes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "alias", "not accepted")  # type: ignore[operator]


def special_inputs(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    return {"fifo": fifo, "directory": folder, "device": Path("/dev/zero")}


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_special_files_are_not_read(cli: object, tmp_path: Path, kind: str) -> None:
    path = special_inputs(tmp_path)[kind]
    expected = "is a directory" if kind == "directory" else "not a regular file"
    one_error_line(cli("workloads", "show", str(path)), str(path), expected)  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["fifo", "symlink", "device", "directory"])
def test_special_files_are_not_replaced(cli: object, tmp_path: Path, kind: str) -> None:
    """The atomic write renamed a temporary file over whatever was there: as root it replaced
    /dev/full with a regular file, a symlink with a file, a named pipe under its reader."""
    target = tmp_path / "out.md"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        (tmp_path / "real.md").write_text("keep\n", encoding="utf-8")
        target.symlink_to(tmp_path / "real.md")
    elif kind == "device":
        target = Path("/dev/full")
    else:
        target.mkdir()
    before = os.lstat(target)
    one_error_line(cli("schema", "--markdown", str(target)), str(target), "writes only new or regular files")  # type: ignore[operator]
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not list(tmp_path.glob(".out.md.*.tmp"))
    if kind == "symlink":
        assert (tmp_path / "real.md").read_text(encoding="utf-8") == "keep\n"


def test_a_broken_hardware_file_is_reported_as_broken_not_unknown(cli: Any, tmp_path: Path) -> None:
    """A profile file with an unknown key used to be reported as "unknown GPU"."""
    from pddplan.support.catalog import catalog_dir

    profile = (catalog_dir("hardware_profiles") / "h100-sxm.yaml").read_text(encoding="utf-8")
    broken = tmp_path / "my-gpu.yaml"
    broken.write_text(profile.replace("name: h100-sxm", "name: my-gpu\ncolour: green", 1), encoding="utf-8")
    workload = (ROOT / "workloads" / "chat-short-lowhit.yaml").read_text(encoding="utf-8")
    assert "type: h100-sxm" in workload
    path = tmp_path / "w.yaml"
    path.write_text(workload.replace("type: h100-sxm", f"type: {broken}", 1), encoding="utf-8")
    line = one_error_line(cli("workloads", "show", str(path)), "colour", "unknown field")
    assert "unknown GPU" not in line
    path.write_text(workload.replace("type: h100-sxm", "type: h100-sxn", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "unknown GPU", "h100-sxm")
