"""JSON text as pddplan writes it everywhere (`--json`, baselines): NaN and infinities as null,
numpy scalars as numbers, keys in their logical order."""

from __future__ import annotations

import json
import math
from typing import Any


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(data: Any) -> str:
    """Deterministic JSON text: sorted keys are not used, so documents keep their logical order."""
    return json.dumps(_clean(data), indent=2, allow_nan=False)


class JsonError(ValueError):
    """Text that is not JSON pddplan accepts; `reason` says why, in a few words."""

    def __init__(self, reason: str, where: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.where = where  # "at line L, column C" where the parser says


def _refuse_constant(name: str) -> Any:
    raise JsonError(f"{name} is not a number JSON allows")


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict; JsonError when a key appears twice (the last would win silently)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonError(f"key {key!r} appears twice")
            seen.add(key)
    return out


def parse_json(text: str, allow_constants: bool = False) -> Any:
    """`json.loads` for untrusted text: JsonError (never a traceback) for invalid JSON, a key given
    twice in one object (as YAML is read), NaN and infinities, integers beyond Python's 4,300-digit
    conversion limit, and nesting deep enough to exhaust the parser's recursion (the C parser
    stops at the interpreter's recursion limit). `allow_constants` reads NaN and Infinity as
    floats, for files that tools write with them (Python's `json.dumps` writes
    `"request_rate": Infinity`); their reader checks what it uses."""
    try:
        if allow_constants:
            return json.loads(text, object_pairs_hook=_once_each)
        return json.loads(text, object_pairs_hook=_once_each, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise JsonError(exc.msg, f"at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise JsonError("nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        if isinstance(exc, JsonError):
            raise
        raise JsonError("a number too long to read") from None
