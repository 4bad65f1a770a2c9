"""A package's verbs, named in its `__init__` and imported on first use (PEP 562's module
`__getattr__`): `from pddplan.evaluate import evaluate` works, and importing the package alone
loads none of its modules, so a package's `__init__` adds no import-time cost and no cycle."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose attribute `name` is `names[name]`'s
    (a module path) attribute of the same name. No name may be a submodule's: the import system
    sets a submodule as its package's attribute once loaded, which would shadow the verb."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(names) | set(vars(sys.modules[package])))

    return __getattr__, __dir__
