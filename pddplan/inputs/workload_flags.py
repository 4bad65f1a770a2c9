"""A workload from command-line flags: `pddplan optimize --model qwen3-32b --gpu h200:32 --isl 16000
--prefix 14000 --osl 1000 --rate 12 --ttft-p90 2 --ttft-p99 5 --tpot-p90 50ms` plans without a
workload file, and writes the one it built so it can be edited and re-run.

    flags = WorkloadFlags(model="qwen3-32b", gpus=("h200:32",), isl=16000, prefix=14000, osl=1000,
                          rate=12.0, ttft_p90="2", ttft_p99="5", tpot_p90="50ms")
    workload = flags.workload()          # a validated Workload
    text = workload_yaml(workload, flags.command_line(), flags.priced())
    written = write_workload(workload, text, Path("plan.yaml"))      # then: pddplan optimize plan.yaml

The flags describe the simplest traffic: fixed lengths (every prompt `isl` tokens, every answer
`osl`), every prompt with the same cached prefix (hit rate = prefix / isl, one bucket of zero
width), Poisson arrivals at `rate`, and every GPU offer in one datacenter `dc-a` unless a flag names
another (`h200:32@dc-b`). The model is a catalog name, a Hugging Face id a catalog entry was copied
from (`Qwen/Qwen3-32B`), or a local config.json or its folder: never the network.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pddplan.errors import InputError
from pddplan.inputs import load_model, model_index
from pddplan.specs.workload import SLA_QUANTILES, Workload
from pddplan.support import catalog
from pddplan.support.limits import check_rate, check_tokens
from pddplan.support.loading import load, write_atomic
from pddplan.support.units import parse_seconds

#: the datacenter every --gpu offer goes to unless it names its own (`h200:32@dc-b`)
DEFAULT_DATACENTER = "dc-a"

#: the flags a plan from flags cannot do without (the SLA's TTFT P90 and P99 have no default)
REQUIRED_FLAGS = ("--model", "--gpu", "--isl", "--osl", "--rate", "--ttft-p90", "--ttft-p99")

#: the SLA flags, by the Sla field each sets: `--ttft-p90` sets `ttft_p90_s`
SLA_FLAGS = {f"{metric}_{q}_s": f"--{metric}-{q}" for metric in ("ttft", "tpot") for q in SLA_QUANTILES}

#: the price flags, by the TokenPrices field each sets
PRICE_FLAGS = {
    "input_usd_per_mtok": "--price-input",
    "cached_input_usd_per_mtok": "--price-cached-input",
    "output_usd_per_mtok": "--price-output",
}

#: the flag that sets each top-level workload section (for errors the specs find)
SECTION_FLAGS = {
    "model": "--model",
    "arrival": "--rate",
    "prompt_tokens": "--isl",
    "output_tokens": "--osl",
    "hit_rate": "--prefix",
}

UNPRICED_SOURCE = (
    "unknown: no token prices were given (--price-input, --price-output); revenue reads 0, and BCR "
    "(requests per dollar) does not use prices"
)

_GPU_OFFER = re.compile(r"(?P<type>[^:@]+):(?P<count>[^@]*)(?:@(?P<datacenter>.*))?")


@dataclass(frozen=True)
class GpuOfferFlag:
    """One `--gpu TYPE:COUNT[@DATACENTER]`: at most `count` GPUs of hardware profile `type`."""

    type: str
    count: int
    datacenter: str = DEFAULT_DATACENTER


def parse_gpu_offer(text: str) -> GpuOfferFlag:
    """`h200:32` -> (h200, 32, dc-a); `h200:32@dc-b` -> (h200, 32, dc-b). TYPE must be a built-in
    hardware profile (`pddplan hardware list`), COUNT a whole number above 0."""
    where = f"--gpu = {text!r}"
    match = _GPU_OFFER.fullmatch(text.strip())
    if match is None:
        raise InputError(f"{where}: expected TYPE:COUNT (h200:32: up to 32 H200 GPUs), optionally @DATACENTER")
    gpu, count, datacenter = match["type"].strip(), match["count"].strip(), match["datacenter"]
    if not count.isdigit() or int(count) == 0:
        raise InputError(f"{where}: COUNT must be a whole number of GPUs above 0, e.g. {gpu}:32")
    known = catalog.entries("hardware_profiles")
    if gpu not in known:
        raise InputError(f"{where}: unknown GPU '{gpu}'{catalog.suggest(gpu, list(known))} (see pddplan hardware list)")
    if datacenter is not None and not datacenter.strip():
        raise InputError(f"{where}: expected a datacenter name after '@'")
    return GpuOfferFlag(gpu, int(count), datacenter.strip() if datacenter else DEFAULT_DATACENTER)


def resolve_model(text: str) -> str:
    """What `--model` names, as a workload's `model` field: a catalog name as given; a local
    config.json, a folder holding one, or a model YAML as its absolute path (so the written
    workload reads it from anywhere); a Hugging Face id as the catalog entry copied from it
    (`Qwen/Qwen3-32B` -> `qwen3-32b`, matched without case). Nothing is downloaded: an id no catalog
    entry names is refused, with the closest catalog name and how to give a local config instead.
    The model is loaded once here, so a config it cannot read is refused naming the flag."""
    index = model_index()
    path = Path(text).expanduser()
    if text in index:
        resolved = text
    elif path.exists():
        resolved = str(path.resolve())
    else:
        by_repo = {str(entry.get("hf_repo", "")).lower(): name for name, entry in index.items()}
        if path.suffix.lower() in (".json", ".yaml", ".yml") or text.startswith(("/", ".", "~")):
            missing = catalog.not_found(text, "model", list(index)).removeprefix(f"{text}: ")
            raise InputError(f"--model = {text!r}: {missing}")
        if text.lower() not in by_repo:
            hint = catalog.suggest(text, list(index))
            raise InputError(
                f"--model = {text!r}: not a catalog model (pddplan models list), nor the Hugging Face id of one, "
                f"nor a local file{hint}; pddplan never downloads: give the path of the model's config.json"
            )
        resolved = by_repo[text.lower()]
    try:
        load_model(resolved)
    except InputError as exc:
        raise InputError(f"--model = {text!r}: {exc}") from None
    return resolved


def seconds_flag(text: str, flag: str) -> float:
    """A time flag's value in seconds: a bare number is seconds (`2`, `0.05`); a number with its
    unit is read as `parse_seconds` reads it (`2s`, `50ms`; `2S` is refused). Above 0 and finite."""
    try:
        value = float(text)
    except ValueError:
        value = parse_seconds(text, flag)
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{flag} = {text!r}: expected a time above 0, in seconds (2, 0.05) or with its unit (50ms)")
    return value


@dataclass(frozen=True)
class WorkloadFlags:
    """The flags of a plan from one command line, by `optimize`'s parameter names; `workload`
    checks them and builds the workload they describe. Times are text (`2`, `2s`, `50ms`);
    prices are USD per million tokens."""

    model: str | None = None
    gpus: tuple[str, ...] = ()
    isl: int | None = None
    prefix: int | None = None
    osl: int | None = None
    rate: float | None = None
    ttft_p50: str | None = None
    ttft_p90: str | None = None
    ttft_p99: str | None = None
    tpot_p50: str | None = None
    tpot_p90: str | None = None
    tpot_p99: str | None = None
    price_input: float | None = None
    price_cached_input: float | None = None
    price_output: float | None = None

    def given(self) -> list[str]:
        """The flags set that only describe a workload (`--rate` also means something with a
        workload file, so it is not among them)."""
        return [
            "--gpu" if f.name == "gpus" else "--" + f.name.replace("_", "-")
            for f in fields(self)
            if f.name != "rate" and getattr(self, f.name) not in (None, ())
        ]

    def missing(self) -> list[str]:
        """The required flags not set."""
        set_flags = set(self.given()) | ({"--rate"} if self.rate is not None else set())
        return [flag for flag in REQUIRED_FLAGS if flag not in set_flags]

    def check_complete(self) -> None:
        """InputError naming every required flag missing."""
        missing = self.missing()
        if missing:
            raise InputError(
                f"missing {', '.join(missing)}: a plan from flags needs {', '.join(REQUIRED_FLAGS[:-1])} and "
                f"{REQUIRED_FLAGS[-1]} (the SLA's TTFT targets at P90 and P99 have no default)"
            )

    def prices(self) -> dict[str, Any]:
        """The workload's `prices`: as given (cached input at the input price unless
        `--price-cached-input` says otherwise); none given: 0, with an `unknown:` source saying so.
        --price-input and --price-output go together."""
        if not self.priced():
            return dict.fromkeys(PRICE_FLAGS, 0.0) | {"source": UNPRICED_SOURCE}
        if self.price_input is None or self.price_output is None:
            absent = "--price-input" if self.price_input is None else "--price-output"
            raise InputError(
                f"{absent} is missing: token prices need --price-input and --price-output (USD per million "
                "tokens; --price-cached-input defaults to --price-input)"
            )
        cached = self.price_input if self.price_cached_input is None else self.price_cached_input
        given = " ".join(
            f"{flag} {_number(value)}" for flag in PRICE_FLAGS.values() if (value := self._flag(flag)) is not None
        )
        return {
            "input_usd_per_mtok": self.price_input,
            "cached_input_usd_per_mtok": cached,
            "output_usd_per_mtok": self.price_output,
            "source": f"user: {given} on the command line",
        }

    def priced(self) -> bool:
        """Whether any token price was given (without, revenue is unknown)."""
        return any(self._flag(flag) is not None for flag in PRICE_FLAGS.values())

    def _flag(self, flag: str) -> Any:
        """The value of `--flag-name` (the field `flag_name`)."""
        return getattr(self, flag.removeprefix("--").replace("-", "_"))

    def sla(self) -> dict[str, float]:
        """The SLA targets given, in seconds, by Sla field."""
        return {
            field: seconds_flag(text, flag)
            for field, flag in SLA_FLAGS.items()
            if (text := self._flag(flag)) is not None
        }

    def deployment(self) -> dict[str, Any]:
        """The datacenters the --gpu offers fill, in the order first named (the first is home)."""
        datacenters: dict[str, list[dict[str, Any]]] = {}
        for text in self.gpus:
            offer = parse_gpu_offer(text)
            offers = datacenters.setdefault(offer.datacenter, [])
            if any(o["type"] == offer.type for o in offers):
                raise InputError(f"--gpu = {text!r}: {offer.type} is offered twice in {offer.datacenter}")
            offers.append({"type": offer.type, "max_count": offer.count})
        return {"datacenters": [{"name": name, "gpus": gpus} for name, gpus in datacenters.items()]}

    def workload(self, model: str | None = None) -> Workload:
        """The workload the flags describe, validated; `model` is `--model` already resolved
        (`resolve_model`; None: resolved here). Every error names its flag."""
        self.check_complete()
        assert self.model is not None and self.isl is not None and self.osl is not None and self.rate is not None
        check_tokens(self.isl, "--isl")
        check_tokens(self.osl, "--osl")
        prefix = self.prefix or 0
        check_tokens(prefix, "--prefix", least=0)
        if prefix > self.isl:
            raise InputError(f"--prefix = {prefix}: more cached tokens than the prompt has (--isl {self.isl})")
        check_rate(self.rate)
        hit = prefix / self.isl
        resolved = model or resolve_model(self.model)
        data = {
            "name": self.name(resolved),
            "description": self.description(resolved),
            "model": resolved,
            "arrival": {"rate_rps": self.rate},
            "prompt_tokens": {"kind": "fixed", "tokens": self.isl},
            "output_tokens": {"kind": "fixed", "tokens": self.osl},
            "hit_rate": {"buckets": [{"low": hit, "high": hit, "share": 1.0}]},
            "sla": self.sla(),
            "prices": self.prices(),
            "deployment": self.deployment(),
        }
        try:
            return Workload.model_validate(data)
        except ValidationError as exc:
            raise InputError(_flag_error(exc)) from None

    def name(self, model: str) -> str:
        """`qwen3-32b-h200x32-isl16000-prefix14000-osl1000-rate12`: the model (a path's folder or
        file stem), the offers, the lengths and the rate, in a workload name's alphabet, at most
        64 characters."""
        path = Path(model)
        stem = model if model in model_index() else (path.parent.name if path.name == "config.json" else path.stem)
        offers = "-".join(f"{o.type}x{o.count}" for o in map(parse_gpu_offer, self.gpus))
        text = f"{stem}-{offers}-isl{self.isl}-prefix{self.prefix or 0}-osl{self.osl}-rate{self.rate:g}"
        cleaned = re.sub(r"[^a-z0-9.\-]+", "-", text.lower()).lstrip(".-")
        return cleaned[:64].rstrip(".-") or "workload"

    def description(self, model: str) -> str:
        """The workload in words, of `model` (resolved: a catalog name or a path)."""
        offers = ", ".join(
            f"up to {o.count} x {o.type}" + (f" in {o.datacenter}" if o.datacenter != DEFAULT_DATACENTER else "")
            for o in map(parse_gpu_offer, self.gpus)
        )
        return (
            f"{model} on {offers}; ISL {self.isl:,} ({self.prefix or 0:,} cached) / OSL {self.osl:,} at "
            f"{self.rate:g} req/s; built from the command line"
        )

    def command_line(self) -> str:
        """The `pddplan optimize` flags that build this workload, as a user would type them (quoted
        for a POSIX shell where needed)."""
        words = ["pddplan", "optimize", "--model", str(self.model)]
        words += [word for gpu in self.gpus for word in ("--gpu", gpu)]
        words += [
            w for f in ("isl", "prefix", "osl") if (v := getattr(self, f)) is not None for w in (f"--{f}", str(v))
        ]
        words += ["--rate", _number(self.rate)] if self.rate is not None else []
        words += [w for flag in SLA_FLAGS.values() if (text := self._flag(flag)) is not None for w in (flag, text)]
        words += [
            w
            for flag in PRICE_FLAGS.values()
            if (value := self._flag(flag)) is not None
            for w in (flag, _number(value))
        ]
        return shlex.join(words)


def _number(value: float) -> str:
    """`12`, `18.8`, `0.08`: the shortest text that reads back as `value`."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _flag_error(exc: ValidationError) -> str:
    """A spec's first complaint about the built workload, as one line naming the flag that set
    the value (`--ttft-p90 = 100000.0: Input should be less than or equal to 86400`)."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    by_field = SLA_FLAGS | PRICE_FLAGS
    fields_named = re.compile(r"\b(" + "|".join(by_field) + r")\b")
    message = fields_named.sub(lambda m: by_field[m[1]], str(error["msg"]).removeprefix("Value error, "))
    if loc and loc[0] in ("sla", "prices") and len(loc) > 1:
        flag = by_field.get(loc[1])
    elif loc and loc[0] == "deployment":
        flag = "--gpu " + {"max_count": "COUNT", "name": "@DATACENTER"}.get(loc[-1], "TYPE")
    else:
        flag = SECTION_FLAGS.get(loc[0]) if loc else None
    value = error.get("input")
    if flag is None:
        return message
    if isinstance(value, dict | list):
        return f"{flag}: {message}"
    return f"{flag} = {value!r}: {message}"


def workload_yaml(workload: Workload, command: str, priced: bool = True) -> str:
    """The workload as YAML under a header saying which command built it and how to re-run it;
    fields left at their defaults are left out (docs/inputs.md lists them)."""
    lines = [
        f"# Written by `{command}`.",
        "# Edit it and re-run `pddplan optimize THIS-FILE`; fields not written take their defaults (docs/inputs.md).",
        "# Fixed lengths, and one hit rate (cached prefix / prompt) for every request.",
    ]
    if not priced:
        lines.append("# No token prices were given: they are 0, so revenue reads 0 (unknown); BCR does not use them.")
    data = workload.model_dump(mode="json", exclude_defaults=True)
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


@dataclass(frozen=True)
class WrittenWorkload:
    """Where a built workload is, and whether this run wrote it (False: the file held it already)."""

    path: Path
    wrote: bool


def write_workload(workload: Workload, text: str, path: Path, force: bool = False) -> WrittenWorkload:
    """Write `workload`'s YAML `text` to `path` atomically (only a new or regular file). An existing
    file that already holds `workload` (however spelt) is left as it is; one holding anything else
    is replaced only with `force`, else InputError."""
    if path.is_file() and not path.is_symlink():
        if _holds(path, workload):
            return WrittenWorkload(path, wrote=False)
        if not force:
            raise InputError(
                f"{path} exists and holds another workload: give --write-workload with a new file, or --force to "
                "replace it"
            )
    write_atomic(path, text)
    return WrittenWorkload(path, wrote=True)


def _holds(path: Path, workload: Workload) -> bool:
    """Whether the file at `path` reads as `workload` (False for anything it cannot read)."""
    try:
        return load(Workload, path) == workload
    except InputError:
        return False


def default_path(workload: Workload) -> Path:
    """Where a built workload goes when no path is given: `<name>.yaml` in the working folder."""
    return Path(f"{workload.name}.yaml")


def workload_for_optimize(
    argument: str | None, flags: WorkloadFlags, path: Path | None = None, force: bool = False
) -> tuple[str, list[str]]:
    """`optimize`'s WORKLOAD: the argument as given, or, from the flags (none may come with an
    argument), the workload they describe written to `path` (default: `default_path`). Returns
    the workload to optimize (a name or a file) and the notes to show the user."""
    given = flags.given() + (["--write-workload"] if path is not None else []) + (["--force"] if force else [])
    if argument is not None:
        if given:
            raise InputError(
                f"give a WORKLOAD or the flags that describe one, not both: got {argument!r} and {', '.join(given)}"
            )
        return argument, []
    if not given:
        raise InputError(
            "Missing argument 'WORKLOAD': give a workload (pddplan workloads list, or a YAML file), or plan "
            f"from flags: {', '.join(REQUIRED_FLAGS)} (see pddplan optimize --help)"
        )
    workload = flags.workload()
    target = path or default_path(workload)
    text = workload_yaml(workload, flags.command_line(), flags.priced())
    written = write_workload(workload, text, target, force)
    rerun = f"re-run it: pddplan optimize {target}"
    notes = [
        f"wrote the workload to {target}; {rerun}"
        if written.wrote
        else f"{target} holds this workload already; {rerun}"
    ]
    if not flags.priced():
        notes.append(
            "note: no token prices given (--price-input, --price-output): revenue is unknown (reads 0); "
            "BCR is requests per dollar and does not use prices"
        )
    return str(target), notes


__all__ = [
    "GpuOfferFlag",
    "WorkloadFlags",
    "WrittenWorkload",
    "default_path",
    "parse_gpu_offer",
    "resolve_model",
    "seconds_flag",
    "workload_for_optimize",
    "workload_yaml",
    "write_workload",
]
