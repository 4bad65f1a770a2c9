"""Results kept by their arguments' content, for pure functions of numbers asked again and again
with equal arguments in new objects (`pddplan.perf.roofline`'s step times).

A call's key is the first argument's key (a function of it the caller gives: an object built anew
is equal by content, not identity) and every other argument by value, an array by its dtype, shape
and bytes. Results are made read-only, since every caller that asks the same shares them, and kept
while they take at most a byte budget, least recently used out first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import is_dataclass
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from pddplan.support.frozen import read_only

_A = TypeVar("_A")
_P = ParamSpec("_P")
_T = TypeVar("_T")

#: what one decorated function keeps at most, and the largest single result it keeps (a
#: simulation's per-request arrays are larger, and never asked twice)
BUDGET_BYTES = 32 * 2**20
LARGEST_KEPT_BYTES = BUDGET_BYTES // 16

#: pydantic models' JSON by identity (a model holding a dict has no hash of its own); each entry
#: keeps its model alive, so an identity is not reused while it is here
_JSON_BY_ID: dict[int, tuple[Any, str]] = {}


def json_by_identity(model: Any) -> str:
    """`model`'s content as a key: its `model_dump_json()`, computed once per model object."""
    known = _JSON_BY_ID.get(id(model))
    if known is None or known[0] is not model:
        if len(_JSON_BY_ID) >= 256:
            _JSON_BY_ID.clear()
        known = (model, model.model_dump_json())
        _JSON_BY_ID[id(model)] = known
    return known[1]


def _argument_key(value: object) -> object:
    """An argument as a key: an array by its type, shape and bytes, anything else as it is."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return _argument_key(np.asarray(value))
    return (type(value).__name__, value)


def _call_key(first: Hashable, args: tuple[object, ...], kwargs: dict[str, object]) -> Hashable:
    """A call's key: its first argument's key, then every other argument by value (`_argument_key`)."""
    return (
        first,
        tuple(_argument_key(arg) for arg in args),
        tuple((name, _argument_key(value)) for name, value in sorted(kwargs.items())),
    )


def _arrays_of(result: object) -> list[np.ndarray]:
    """The arrays of a result: itself, or a dataclass's fields."""
    values = vars(result).values() if is_dataclass(result) else (result,)
    return [value for value in values if isinstance(value, np.ndarray)]


class KeptResults:
    """Results by key, least recently used out once they hold more than `budget_bytes` (a result's
    arrays and its arguments' bytes); one above LARGEST_KEPT_BYTES is not kept. Safe across threads."""

    def __init__(self, budget_bytes: int = BUDGET_BYTES) -> None:
        self.budget_bytes = budget_bytes
        self.hits = self.misses = self.kept_bytes = 0
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, result: object, argument_bytes: int) -> None:
        size = argument_bytes + sum(a.nbytes for a in _arrays_of(result))
        if size > min(LARGEST_KEPT_BYTES, self.budget_bytes):
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (result, size)
            self.kept_bytes += size
            while self.kept_bytes > self.budget_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self.kept_bytes -= dropped


def kept_by_content(
    key_of: Callable[[_A], Hashable],
) -> Callable[[Callable[Concatenate[_A, _P], _T]], Callable[Concatenate[_A, _P], _T]]:
    """A decorator: the function's results kept (`KeptResults`, its `.results`) by `key_of` its
    first argument and the other arguments' values, and made read-only."""

    def decorate(function: Callable[Concatenate[_A, _P], _T]) -> Callable[Concatenate[_A, _P], _T]:
        results = KeptResults()

        @wraps(function)
        def kept(first: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
            key = _call_key(key_of(first), args, kwargs)
            known = results.get(key)
            if known is not None:
                return known  # type: ignore[return-value]
            result = function(first, *args, **kwargs)
            read_only(*_arrays_of(result))
            results.put(key, result, sum(np.asarray(value).nbytes for value in (*args, *kwargs.values())))
            return result

        kept.results = results  # type: ignore[attr-defined]
        return kept

    return decorate


class _Same:
    """A key that stands for one object: equal only to a key of that very object, and holding it,
    so that its identity is not reused while the key lives."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


def kept_by_identity(
    count: int,
) -> Callable[[Callable[Concatenate[_A, _P], _T]], Callable[Concatenate[_A, _P], _T]]:
    """A decorator for a pure function of an immutable first argument asked again about the very
    same object (a plan's scenario evaluated in a search, then by its verification): the last
    `count` results kept by that object's identity and the other arguments' values, made
    read-only. Results of any size are kept (`kept_by_content` keeps small ones by content)."""

    def decorate(function: Callable[Concatenate[_A, _P], _T]) -> Callable[Concatenate[_A, _P], _T]:
        recent: OrderedDict[Hashable, object] = OrderedDict()
        lock = threading.Lock()

        @wraps(function)
        def kept(first: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
            key = _call_key(_Same(first), args, kwargs)
            with lock:
                if key in recent:
                    recent.move_to_end(key)
                    return recent[key]  # type: ignore[return-value]
            result = function(first, *args, **kwargs)
            read_only(*_arrays_of(result))
            with lock:
                recent[key] = result
                while len(recent) > count:
                    recent.popitem(last=False)
            return result

        return kept

    return decorate
