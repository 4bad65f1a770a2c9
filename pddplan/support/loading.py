"""Read input files into validated specs, and report what is wrong with them in one line.

A file is parsed (YAML or JSON), then validated by a strict pydantic model. Every failure, from a
missing file to an unknown key, becomes an :class:`~pddplan.errors.InputError` whose message names
the file, the field path, the offending value and what was expected.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import re
import secrets
import stat
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from pddplan.errors import InputError
from pddplan.support.jsontext import JsonError, parse_json

ModelT = TypeVar("ModelT", bound=BaseModel)


_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


class _PlainLoader(_SafeBase):  # type: ignore[misc]
    """A safe YAML loader that leaves dates as strings, so `as_of: 2026-05-01` stays text, and
    refuses what a hand-written input never needs and a hostile one abuses: a key given twice
    (the last would win silently) and aliases (`*name`, which let a 2 KB file expand to billions
    of values)."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node in self.constructed_objects or node in self.recursive_objects:
            mark = node.start_mark
            problem = (
                "a value reused through an alias (&name ... *name) is not accepted in pddplan inputs; write it out"
            )
            raise yaml.constructor.ConstructorError(None, None, problem, mark)
        return super().construct_object(node, deep)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = key_node.value
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


_PlainLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# YAML 1.1 wants a dot in an exponent float (1.0e-5); accept JSON's 1e-5 too.
_PlainLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789")
)


#: texts up to this many characters keep their parse (a catalog file is read again by every fit, scenario
#: and test); a trace or a large input is parsed each time and not held
MAX_REMEMBERED_CHARS = 256 * 1024


@functools.lru_cache(maxsize=128)
def _remembered(text: str) -> Any:
    return yaml.load(text, Loader=_PlainLoader)


def parse_text(text: str, source: str) -> Any:
    """Parse YAML (a superset of JSON) text; `source` names it in error messages. A small text
    parsed before returns a copy of its earlier parse (plain data: the same values)."""
    try:
        if len(text) <= MAX_REMEMBERED_CHARS:
            return copy.deepcopy(_remembered(text))
        return yaml.load(text, Loader=_PlainLoader)
    except ValueError:  # an integer of more than 4,300 digits (Python's conversion limit)
        raise InputError(f"{source}: not valid YAML: a number too long to read") from None
    except RecursionError:
        raise InputError(f"{source}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}: not valid YAML{where}: {problem}") from None


MAX_INPUT_BYTES = 64 * 2**20  # an input file larger than this is not a hand-written spec


def check_readable(path: Path, max_bytes: int = MAX_INPUT_BYTES) -> None:
    """InputError unless `path` is a regular file of at most `max_bytes` (not a directory, a
    device such as /dev/zero, or a named pipe that would block)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path}: is a directory, expected a file")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: not a regular file (a device or a pipe); expected a file")
    if info.st_size > max_bytes:
        raise InputError(f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} an input file may have")


def read_text(path: Path) -> str:
    """The UTF-8 text of a regular file of at most MAX_INPUT_BYTES; one-line InputError otherwise
    (missing, a directory, a device, a pipe, too large, binary)."""
    check_readable(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None


def read_data(path: Path) -> Any:
    """Read and parse a YAML or JSON file into plain Python data (a regular file only)."""
    text = read_text(path)
    if path.suffix.lower() == ".json":
        try:
            return parse_json(text, allow_constants=True)  # the schema names the field of a NaN or an Infinity
        except JsonError as exc:
            raise InputError(f"{path}: not valid JSON{' ' + exc.where if exc.where else ''}: {exc.reason}") from None
    return parse_text(text, str(path))


_NAMES_ITS_FIELD = re.compile(r"^[a-z_][\w.\[\]-]* = ")


def validate(model: type[ModelT], data: Any, source: str) -> ModelT:
    """Validate plain data against `model`; raise a one-line InputError naming `source`."""
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else type(data).__name__
        raise InputError(f"{source}: expected a mapping of fields at the top level, got {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, model, data, source)) from None


def load(model: type[ModelT], path: Path) -> ModelT:
    """Read `path` and validate it as `model`."""
    return validate(model, read_data(path), str(path))


def describe_validation_error(exc: ValidationError, model: type[BaseModel], data: Any, source: str) -> str:
    """One line for the first error: file, field path, offending value, what was expected; the
    second error, if any, said briefly after it."""
    # A misspelt key shows up twice: as an unknown key and as the missing one. The typo explains
    # both, so unknown keys come first.
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    first = _describe(errors[0], model, data)
    if len(errors) == 1:
        return f"{source}: {first}"
    rest = f"; and {len(errors) - 2} more" if len(errors) > 2 else ""
    return f"{source}: {first} (also {_describe(errors[1], model, data)}{rest})"


def _describe(error: Any, model: type[BaseModel], data: Any) -> str:
    """`path = value: what is wrong` for one pydantic error, with the path as the file writes it."""
    loc = tuple(error["loc"])
    shown = _as_written(data, loc)
    path = _dotted(shown)
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        known = _fields_at(model, loc[:-1])
        guess = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean '{guess[0]}'?" if guess else (f"; expected one of: {', '.join(known)}" if known else "")
        return f"{path}: unknown field{hint}"
    if error["type"] == "missing":
        return f"{path}: required field is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    # the value in the file: the error's own input when it is one number or string, else looked
    # up; a check across fields (min above max) is about a mapping, shown by its path alone
    given = error.get("input")
    value = given if isinstance(given, int | float | str | bool) else _value_at(data, shown)
    if not path:
        # a whole-file check that names its own field (`memory.hbm_gb.value = 1e+300: ...`)
        return message if _NAMES_ITS_FIELD.match(message) else f"top level: {message}"
    if isinstance(value, Mapping):
        return f"{path}: {message}"
    written = _value_at(data, shown)
    if isinstance(written, str) and isinstance(given, int | float) and not isinstance(given, bool):
        # a quantity written with its unit ('5B/s'), out of bounds once read in the field's unit
        return f"{path} = {_show(written)} (read as {given:g}): {message}"
    return f"{path} = {_show(value)}: {message}"


def _as_written(data: Any, loc: Sequence[Any]) -> tuple[Any, ...]:
    """`loc` without the tags pydantic adds for a discriminated union (`prompt_tokens.fixed.tokens`
    is `prompt_tokens.tokens` in the file, whose `kind: fixed` picked the member)."""
    out: list[Any] = []
    current = data
    for part in loc:
        if (
            isinstance(current, Mapping)
            and isinstance(part, str)
            and part not in current
            and current.get("kind") == part
        ):
            continue
        out.append(part)
        try:
            current = current[part]
        except (KeyError, IndexError, TypeError):
            current = None
    return tuple(out)


def _dotted(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _value_at(data: Any, loc: Sequence[Any]) -> Any:
    current = data
    for part in loc:
        try:
            current = current[part]
        except (KeyError, IndexError, TypeError):
            return None
    return current


def _show(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The field names a strict model accepts at `loc`, found by walking the annotations."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return []
            current = field.annotation
        elif isinstance(part, int) or not isinstance(current, type):
            args = [a for a in typing.get_args(current) if a is not type(None)]
            tagged = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel) and _tag_of(a) == part]
            current = tagged[0] if tagged else (args[-1] if args else None)
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _tag_of(model: type[BaseModel]) -> str | None:
    """The `kind` literal of a member of a discriminated union (pydantic puts it in error paths)."""
    field = model.model_fields.get("kind")
    values = typing.get_args(field.annotation) if field is not None else ()
    return str(values[0]) if len(values) == 1 else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated and pick the model out of a union of one model and None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) == 1:
            return models[0]
        if len(args) == 1:
            return _unwrap(args[0])
    return annotation


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` through a temporary file and a rename, so no half file is left."""
    write_atomic_bytes(path, text.encode("utf-8"), mode)


def write_atomic_bytes(path: Path, payload: bytes, mode: int | None = None) -> None:
    """Write `payload` to a temporary file beside `path`, then rename it over `path`.

    A rename within one directory is atomic on POSIX and Windows, so a reader (or an interrupted
    run) sees either the old file whole or the new one whole. The temporary file has a name no one
    can guess and is created only if nothing is there (O_EXCL: a symbolic link planted under it
    is not followed), so nothing is written outside `path`'s folder; `mode` (e.g. 0o755 for a
    script) is set on it before the rename, else the umask's default applies.
    """
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else "a device or a pipe"
        raise InputError(f"{path}: is {kind}; pddplan writes only new or regular files")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            if mode is not None:
                os.chmod(out.fileno() if os.chmod in os.supports_fd else tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror}") from None
    except BaseException:  # interrupted (Ctrl-C): leave the old file and no temporary behind
        tmp.unlink(missing_ok=True)
        raise


def writable_folder(folder: Path, flag: str) -> None:
    """Create `folder` (and its parents) for files to be written into; InputError naming `flag` when
    it is a symbolic link (to a system folder, say: nothing is written outside the folder the user
    named), a file or a device, or cannot be made."""
    for _ in range(2):  # again after mkdir: made by someone else between the check and mkdir
        if folder.is_symlink():
            raise InputError(f"{flag} {folder}: is a symbolic link; give a new or ordinary folder")
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{flag} {folder}: is not a folder (a file or a device); give a new or existing folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{flag} {folder}: cannot create: {exc.strerror}") from None
