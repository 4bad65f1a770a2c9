"""Find built-in catalog entries (hardware profiles, workloads, models) by name or path.

In a source checkout the catalogs are the top-level `hardware_profiles/` and `workloads/` folders;
in an installed wheel they are copied under `pddplan/_catalog/`. The model catalog always lives in
`pddplan/model_catalog/`. A name that is not in a catalog but names an existing file is loaded as
that file.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pddplan.errors import InputError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # pddplan/


def catalog_dir(kind: str) -> Path:
    """The folder of catalog `kind` ("hardware_profiles", "workloads" or "model_catalog")."""
    if kind == "model_catalog":
        return _PACKAGE_DIR / "model_catalog"
    installed = _PACKAGE_DIR / "_catalog" / kind
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / kind


def shown(kind: str, path: Path) -> str:
    """How messages name a file: a catalog entry by its name (`pdd-agent-64k`, as a user writes
    it, not the package's install path), any other file by its path."""
    try:
        inside = path.resolve().parent == catalog_dir(kind).resolve()
    except OSError:
        inside = False
    return path.stem if inside and path.suffix in (".yaml", ".yml") else str(path)


def is_installed_copy() -> bool:
    """Whether the catalogs are the copies inside an installed wheel (not a source checkout's
    folders): files there are pip's to replace, not a user's to edit."""
    return (_PACKAGE_DIR / "_catalog").is_dir()


def shipped_measurements() -> Path:
    """The public measured step times `pddplan accuracy` scores against (tests/data in a checkout)."""
    installed = _PACKAGE_DIR / "_catalog" / "measurements.csv"
    return installed if installed.is_file() else _PACKAGE_DIR.parent / "tests" / "data" / "measurements.csv"


def entries(kind: str, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> dict[str, Path]:
    """Catalog entries of `kind`, by name (the file stem), sorted."""
    folder = catalog_dir(kind)
    if not folder.is_dir():
        return {}
    found = {p.stem: p for p in folder.iterdir() if p.suffix in suffixes and not p.name.startswith(".")}
    return dict(sorted(found.items()))


def resolve(kind: str, name_or_path: str, what: str) -> Path:
    """A catalog entry's path by name, or the path itself when it names an existing file.

    `what` names the kind of thing for the error message ("GPU", "workload").
    """
    known = entries(kind)
    if name_or_path in known:
        return known[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists() or "/" in name_or_path:
        if not path.exists():
            raise InputError(not_found(name_or_path, what, list(known)))
        return path
    raise InputError(f"unknown {what} '{name_or_path}'{suggest(name_or_path, list(known))}")


def suggest(name: str, known: list[str]) -> str:
    """A "; did you mean 'x'?" hint (`closest`), or the list of known names."""
    guess = closest(name, known)
    return f"; did you mean '{guess}'?" if guess else f"; known: {', '.join(known)}"


def closest(name: str, known: list[str]) -> str | None:
    """The known name `name` most likely meant, None for none. Tried in turn, case, dashes and dots
    ignored, on the last part of a path: the same name, a known name it starts (`h100` ->
    `h100-sxm`), the closest spelling, a known name inside it (`Qwen/Qwen3-32B-FP8` -> `qwen3-32b`)."""

    def fold(text: str) -> str:
        return text.lower().replace("-", "").replace("_", "").replace(".", "")

    folded = {fold(k): k for k in known}
    base = name.rsplit("/", 1)[-1]
    key = fold(Path(base).stem if Path(base).suffix.lower() in (".json", ".yaml", ".yml") else base)
    if not key:
        return None
    if key in folded:
        return folded[key]
    prefixed = [k for f, k in folded.items() if f.startswith(key)]
    inside = sorted((k for f, k in folded.items() if f and f in key), key=len, reverse=True)
    close = difflib.get_close_matches(base.lower(), known, n=1, cutoff=0.6)
    guess = prefixed[:1] or close or inside[:1]
    return guess[0] if guess else None


def not_found(name_or_path: str, what: str, known: list[str]) -> str:
    """`X: file not found` for a path that names nothing, with the catalog entry it may have
    meant: `Qwen/Qwen3-32B: file not found, nor a catalog model; did you mean 'qwen3-32b'?`."""
    guess = closest(name_or_path, known)
    return f"{name_or_path}: file not found" + (f", nor a catalog {what}; did you mean '{guess}'?" if guess else "")
