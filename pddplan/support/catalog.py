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
            raise InputError(f"{name_or_path}: file not found")
        return path
    raise InputError(f"unknown {what} '{name_or_path}'{suggest(name_or_path, list(known))}")


def suggest(name: str, known: list[str]) -> str:
    """A "; did you mean 'x'?" hint (prefix matches first), or the list of known names."""
    prefixed = [k for k in known if k.startswith(name)]
    folded = {k.lower().replace("-", "").replace("_", ""): k for k in known}
    same = folded.get(name.lower().replace("-", "").replace("_", ""))
    guess = ([same] if same else []) or prefixed[:1] or difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f"; did you mean '{guess[0]}'?" if guess else f"; known: {', '.join(known)}"
