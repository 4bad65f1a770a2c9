"""Write an export's files into a folder: each atomically, scripts executable."""

from __future__ import annotations

import os
from pathlib import Path

from pddplan.errors import InputError
from pddplan.support.loading import write_atomic


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Create `folder` if needed and write each file (a temporary file, then a rename); `.sh`
    files are made executable. InputError when `folder` is not a new or ordinary folder: a
    symbolic link (to a system folder, say) is refused, so nothing is written outside the folder
    the user named."""
    _check_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {folder}: cannot create: {exc.strerror}") from None
    _check_folder(folder)  # created by someone else between the check and mkdir
    written = []
    for name, text in files.items():
        path = folder / name
        write_atomic(path, text)
        if name.endswith(".sh"):
            os.chmod(path, 0o755)
        written.append(path)
    return written


def _check_folder(folder: Path) -> None:
    if folder.is_symlink():
        raise InputError(f"--out {folder}: is a symbolic link; give a new or ordinary folder")
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {folder}: exists and is not a folder")
