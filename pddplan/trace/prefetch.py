"""Read a trace in a second process while this one consumes it: parsing JSON lines and summing
them up cost about the same, so on two cores a large trace streams in about half the time.

The reader process is forked (it inherits the open path, nothing is pickled but the parsed
batches) and sends batches of BATCH requests through a pipe; an InputError in it comes back as
its message and is raised here. Where forking is not safe (another thread runs, see
`pddplan.optimize.parallel`) or the file is small, the trace is read in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.support.forking import die_with_parent, fork_is_safe
from pddplan.trace.read import TraceFormat, TraceRequest, read_trace

BATCH = 4096
#: Below this size a second process costs more than it saves.
MIN_PREFETCH_BYTES = 32 << 20


def _reader(path: Path, fmt: TraceFormat, block_tokens: int, connection: Any, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    try:
        batch: list[tuple[Any, ...]] = []  # plain tuples: a named tuple pickles by class, 5x slower
        for request in read_trace(path, fmt, block_tokens):
            batch.append(tuple(request))
            if len(batch) >= BATCH:
                connection.send(batch)
                batch = []
        if batch:
            connection.send(batch)
        connection.send(None)
    except InputError as error:
        connection.send(str(error))
    finally:
        connection.close()


def stream_trace(
    path: Path, fmt: TraceFormat = "mooncake", block_tokens: int = 512
) -> Generator[TraceRequest, None, None]:
    """`read_trace`, parsed in a forked reader process when the file is large and forking safe."""
    try:
        large = path.stat().st_size >= MIN_PREFETCH_BYTES
    except OSError:
        large = False
    if not large or not fork_is_safe():
        yield from read_trace(path, fmt, block_tokens)
        return
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_reader, args=(path, fmt, block_tokens, sender, os.getpid()), daemon=True)
    process.start()
    sender.close()
    try:
        while True:
            try:
                batch = receiver.recv()
            except EOFError:
                raise InputError(f"{path}: the trace reader stopped before the end of the file") from None
            if batch is None:
                break
            if isinstance(batch, str):
                raise InputError(batch)
            yield from map(TraceRequest._make, batch)
    finally:
        receiver.close()
        if process.is_alive():
            process.terminate()
        process.join()
