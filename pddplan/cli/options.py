"""Options and arguments several commands share, and the small steps they share (write a report,
show a library call's progress)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

if TYPE_CHECKING:
    from pddplan.optimize.options import RelayPlacement


JsonFlag = Annotated[bool, typer.Option("--json", help="Write machine-readable JSON to stdout, nothing else.")]


DetailFlag = Annotated[
    bool,
    typer.Option(
        "--detail",
        help="Every column and row (default: a summary, in the columns that fit the terminal).",
    ),
]


JobsOption = Annotated[
    int | None, typer.Option("--jobs", "-j", help="Parallel workers (default: one per CPU).", show_default=False)
]


TraceFormatOption = Annotated[str, typer.Option("--trace-format", help="With --trace: mooncake or csv.")]


TraceCacheOption = Annotated[
    str | None,
    typer.Option(
        "--cache-capacity", help="With --trace: the prefix cache, bytes (100GB) or tokens (5Mtok); default unbounded."
    ),
]


BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        help="fork (default: copies of this process; one process where forking is unsafe), loky, threading, "
        "dask or ray.",
        show_default=False,
    ),
]


SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        "--address",
        help="dask scheduler or ray cluster address (default: a local cluster of --jobs workers).",
    ),
]


ArchitectureOption = Annotated[
    list[str] | None,
    typer.Option("--architecture", "-a", help="Architecture (repeatable); default: all `pddplan architectures` lists."),
]


KvDtypeOption = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype: bf16 or fp8.")]


def _kv_dtype(value: str | None) -> Any:
    from pddplan.errors import InputError

    if value not in (None, "bf16", "fp8"):
        raise InputError(f"--kv-dtype = {value!r}: expected bf16 or fp8")
    return value


def _layout_flag(ep: bool | None, tp_attention: bool) -> bool | Literal["tp-attention"] | None:
    """--ep/--no-ep and --tp-attention as `estimate`'s expert_parallel value."""
    from pddplan.errors import InputError

    if not tp_attention:
        return ep
    if ep is False:
        raise InputError("--tp-attention with --no-ep: tensor-parallel attention is a layout of expert parallelism")
    return "tp-attention"


# -- deployments ----------------------------------------------------------------------------------
PlanArg = Annotated[str, typer.Argument(help="Plan file (YAML/JSON), e.g. written by `optimize --output`.")]


WorkloadArg = Annotated[str, typer.Argument(help="Workload name (see `pddplan workloads list`) or YAML file.")]


ReportOption = Annotated[
    Path | None,
    typer.Option(
        "--report",
        help="Also write an HTML report of the plan here: deployment, figures, cost, TTFT/TPOT "
        "distributions, sensitivity, inputs (one offline file).",
    ),
]


def _write_report(path: Path, workload: str, **parts: Any) -> None:
    """Build the plan report (`pddplan.report.plan_report`) and write it atomically."""
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.inputs.input_set import load_input_set
    from pddplan.report import output
    from pddplan.report.plan_report import plan_report
    from pddplan.support.loading import write_atomic

    inputs = load_input_set(load_workload(workload), workload_dir(workload))
    write_atomic(path, plan_report(inputs=inputs, **parts))
    output.diagnostics().print(f"wrote the report to {path}")


def _check_report(path: Path | None) -> None:
    if path is not None:
        from pddplan.report.plan_report import check_report_path

        check_report_path(path)


@contextlib.contextmanager
def _progress() -> Iterator[Callable[[str], None]]:
    """A library call's `progress`: the first line it reports opens a status line on stderr
    (`output.status`), each later one replaces it, and the status closes when the block ends; a
    call that reports nothing shows nothing."""
    from pddplan.report import output

    with contextlib.ExitStack() as stack:
        shown: list[Any] = []

        def show(text: str) -> None:
            if shown:
                shown[0].update(text)
            else:
                shown.append(stack.enter_context(output.status(text)))

        yield show


def _relay_placement(value: str) -> RelayPlacement:
    """The --relay flag's value, checked."""
    from pddplan.errors import InputError
    from pddplan.optimize.options import RELAY_PLACEMENTS

    for placement in RELAY_PLACEMENTS:
        if value == placement:
            return placement
    raise InputError(f"--relay = {value!r}: expected one of {', '.join(RELAY_PLACEMENTS)}")
