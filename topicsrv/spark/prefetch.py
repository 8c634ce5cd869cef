"""Read ahead: the next page is requested while the last one is turned into Arrow.

Rule 1: `prefetched(pages, depth)` runs the iterator `pages` (the network reads and their
parsing) in a thread of its own and yields its items in order, at most `depth` ahead of the
consumer, so the server renders page k+1 while the task builds page k's batch and Spark
consumes it (docs/spark.md "Speed": a task reading page by page left the server idle between
its requests). The socket reads release the GIL; the consumer's Arrow building runs meanwhile.
Rule 2: an exception of `pages` is raised to the consumer at its place in the order; a consumer
that stops early (Spark's `limit`, a failed task) stops the thread before `prefetched`
returns, so the caller may close the client afterwards.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_END = object()


def prefetched(pages: Iterator[T], depth: int = 2) -> Iterator[T]:
    box: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[Any, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in pages:
                if not put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - Rule 2: raised in the consumer
            put((_END, exc))
            return
        finally:
            close = getattr(pages, "close", None)
            if close is not None:  # a generator stopped early runs its own cleanup here
                close()
        put((_END, None))

    worker = threading.Thread(target=run, name="topics-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, exc = box.get()
            if exc is not None:
                raise exc
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        worker.join()
