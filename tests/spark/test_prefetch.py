"""spark/prefetch.py: pages read ahead in a thread, yielded in order; errors and early stops."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from topicsrv.spark.prefetch import prefetched


def test_items_in_order_at_most_depth_ahead() -> None:
    made: list[int] = []

    def pages() -> Iterator[int]:
        for i in range(10):
            made.append(i)
            yield i

    it = prefetched(pages(), depth=2)
    assert next(it) == 0
    threading.Event().wait(0.3)  # the reader runs ahead, but only `depth` (+ the one it holds) past the consumer
    assert len(made) <= 4
    assert list(it) == list(range(1, 10))


def test_an_error_reaches_the_consumer_in_its_place() -> None:
    def pages() -> Iterator[int]:
        yield 1
        yield 2
        raise ConnectionError("server gone")

    got: list[int] = []
    with pytest.raises(ConnectionError, match="server gone"):
        for item in prefetched(pages()):
            got.append(item)
    assert got == [1, 2]


def test_an_early_stop_ends_the_reader_thread() -> None:
    closed = threading.Event()

    def pages() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    before = threading.active_count()
    it = prefetched(pages())
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()  # Spark stopped reading (a limit): the thread is gone when close returns
    assert threading.active_count() == before and closed.is_set()
    assert not any(t.name == "topics-prefetch" for t in threading.enumerate())
