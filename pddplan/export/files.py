"""Write an export's files into a folder: each atomically, scripts executable."""

from __future__ import annotations

from pathlib import Path

from pddplan.support.loading import writable_folder, write_atomic


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Create `folder` if needed and write each file (a temporary file, then a rename); `.sh`
    files are made executable. InputError when `folder` is not a new or ordinary folder: a
    symbolic link (to a system folder, say) is refused, so nothing is written outside the folder
    the user named."""
    writable_folder(folder, "--out")
    written = []
    for name, text in files.items():
        path = folder / name
        write_atomic(path, text, 0o755 if name.endswith(".sh") else None)
        written.append(path)
    return written
