"""The serving architectures pddplan plans, as plug-ins: one module each in this package.

A module defines a subclass of `base.Architecture` and exports one instance as `ARCHITECTURE`;
the registry finds every such module, so adding an architecture is one new file (plus its tests).
Everything outside this package asks the registry (`get`, `names`, `subject`) instead of comparing
architecture names.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from pddplan.architectures.base import Architecture, ArchitectureInfo, DecodeGpu, Dispatch, Pipeline, Transport
from pddplan.specs.plan import Plan, register_architecture_rules


@cache
def _registry() -> dict[str, Architecture]:
    found: list[Architecture] = []
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        architecture = getattr(module, "ARCHITECTURE", None)
        if isinstance(architecture, Architecture):
            found.append(architecture)
    found.sort(key=lambda a: (a.order, a.name))
    return {a.name: a for a in found}


def names() -> tuple[str, ...]:
    """Every architecture's name, in table order."""
    return tuple(_registry())


def get(name: str) -> Architecture:
    """The architecture called `name`; KeyError naming the known ones otherwise."""
    try:
        return _registry()[name]
    except KeyError:
        raise KeyError(f"unknown architecture {name!r}: expected one of {', '.join(names())}") from None


def all_architectures() -> tuple[Architecture, ...]:
    return tuple(_registry().values())


def subject() -> Architecture:
    """The architecture the others are compared against (PDD)."""
    return next(a for a in _registry().values() if a.subject)


def baselines() -> tuple[Architecture, ...]:
    return tuple(a for a in _registry().values() if not a.subject)


def describe() -> list[ArchitectureInfo]:
    """One record per architecture: what `pddplan architectures` lists."""
    return [
        ArchitectureInfo(
            name=a.name,
            summary=a.summary,
            kv_path=a.transport.value,
            decode_gpu=a.decode_gpu.value,
            relay=a.has_relay,
            decode_datacenter="other" if a.uses_wan else "same",
            subject=a.subject,
        )
        for a in _registry().values()
    ]


class _Registered:
    """The registry as the specs check plans against it (`specs.plan.ArchitectureRules`)."""

    def names(self) -> tuple[str, ...]:
        return names()

    def validate(self, plan: Plan) -> None:
        get(plan.architecture).validate(plan)


register_architecture_rules(_Registered())

__all__ = [
    "Architecture",
    "DecodeGpu",
    "Dispatch",
    "Pipeline",
    "Transport",
    "all_architectures",
    "baselines",
    "describe",
    "get",
    "names",
    "subject",
]
