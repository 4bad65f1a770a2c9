"""The typer applications: the root command and its groups, and the one-line errors every command shares."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from typer.core import TyperGroup


class _Group(TyperGroup):
    """Turns every pddplan error, usage error and failed write to stdout into one line on stderr
    and its exit code, never a traceback."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # the command line as given, so that a usage error can quote the value it refused
        ctx.meta.setdefault(_ARGS_KEY, list(args))
        with _one_line_usage_errors():
            return list(super().parse_args(ctx, args))

    def invoke(self, ctx: Any) -> Any:
        from pddplan.errors import PddplanError

        try:
            with _one_line_usage_errors():
                result = super().invoke(ctx)
                sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
                return result
        except PddplanError as exc:
            typer.echo(f"error: {_one_line(str(exc))}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # the reader went away (`pddplan ... | head`): stop quietly, as other CLI tools do
            _silence_stdout()
            raise typer.Exit(141) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
                raise
            _silence_stdout()
            where = exc.filename or "standard output"
            typer.echo(f"error: {where}: cannot write: {exc.strerror}", err=True)
            raise typer.Exit(2) from None


def _one_line(message: str) -> str:
    """`message` with every control character escaped (a carriage return as \\r): a value from an
    input file can carry one into a message, and it would end the line, or overwrite it, on a
    terminal."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in message)


@contextlib.contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """A usage error (unknown option, missing argument, a value of the wrong type) as one line:
    `error: MESSAGE (see COMMAND --help)`, exit 2. A bare command still shows its help."""
    # typer >= 0.26 (the floor in pyproject.toml) vendors click as typer._click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "pddplan"
        message = " ".join(exc.format_message().split())
        given = _value_given(exc)
        if given is not None and given not in message:
            message += f" (got {given!r})"  # newer typer versions leave the value out
        typer.echo(f"error: {message} (see {command} --help)", err=True)
        raise typer.Exit(2) from None


_ARGS_KEY = "pddplan.args"


def _value_given(exc: Any) -> str | None:
    """The text the user gave for the option a usage error refused (`--rate abc` or
    `--rate=abc`), when the error is about one option's value."""
    param, ctx = getattr(exc, "param", None), exc.ctx
    if param is None or ctx is None:
        return None
    args: list[str] = ctx.meta.get(_ARGS_KEY, [])
    for option in getattr(param, "opts", []):
        for index, arg in enumerate(args):
            if arg == option and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(option + "="):
                return arg[len(option) + 1 :]
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _app(help_text: str, completion: bool = False) -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=help_text,
        no_args_is_help=True,
        add_completion=completion,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


# shell completion on the root command only: `pddplan --install-completion` / `--show-completion`
app = _app("Plan and price cross-datacenter PDD (prefill / relay-decode / main-decode) LLM serving.", completion=True)


def _print_version(value: bool) -> None:
    if value:
        from pddplan import __version__

        typer.echo(f"pddplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version and exit."),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress or notices on stderr (errors still show)."),
    ] = False,
) -> None:
    """Plan and price cross-datacenter PDD (prefill / relay-decode / main-decode) LLM serving."""
    from pddplan.report import output

    output.set_quiet(quiet)


hardware_app = _app("Browse the built-in hardware profiles.")


models_app = _app("Browse the built-in model catalog, or inspect a config.json.")


workloads_app = _app("Browse the shipped workloads, or check a workload file.")


trace_app = _app("Read request traces (Mooncake JSON lines, CSV, the Azure LLM trace).")

app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(workloads_app, name="workloads")
app.add_typer(trace_app, name="trace")
