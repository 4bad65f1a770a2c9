"""`map_forked`: independent calls on forked workers, in order, the function inherited (a closure
needs no pickling), and the same answer in one process where forking is not safe."""

from __future__ import annotations

import os
import threading

import pytest

from pddplan.support import forking


def test_results_come_back_in_order_from_other_processes() -> None:
    offset = 1000  # a closure over a local: it could not be pickled to a spawned worker
    parent = os.getpid()
    out = forking.map_forked(lambda item: (item + offset, os.getpid() != parent), list(range(7)), 2)
    assert [value for value, _ in out] == list(range(1000, 1007))
    if forking.fork_is_safe():
        assert any(elsewhere for _, elsewhere in out)


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_counts_the_results_as_they_come_in_order(workers: int) -> None:
    seen: list[tuple[int, int]] = []
    out = forking.map_forked(
        lambda item: item * item, [3, 1, 2], workers, lambda done, total: seen.append((done, total))
    )
    assert out == [9, 1, 4] and seen == [(1, 3), (2, 3), (3, 3)]


def test_one_worker_or_one_item_runs_here() -> None:
    parent = os.getpid()
    assert forking.map_forked(lambda _: os.getpid(), [1, 2, 3], 1) == [parent] * 3
    assert forking.map_forked(lambda _: os.getpid(), [1], 4) == [parent]
    assert forking.map_forked(lambda _: os.getpid(), [], 4) == []


def test_with_another_thread_running_it_does_not_fork() -> None:
    """A running thread may hold a lock the fork would copy held: then the calls run here."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        parent = os.getpid()
        assert forking.map_forked(lambda _: os.getpid(), [1, 2], 2) == [parent, parent]
    finally:
        stop.set()
        thread.join()


def test_an_error_in_a_worker_reaches_the_caller() -> None:
    def fail(item: int) -> int:
        if item == 2:
            raise ValueError("item 2")
        return item

    with pytest.raises(ValueError, match="item 2"):
        forking.map_forked(fail, [1, 2, 3], 2)
