"""A graceful stop: stop accepting, let the requests in flight finish, then cancel the rest.

SIGTERM, SIGINT and the RESP `SHUTDOWN` all go through `Drain.shutdown` (server.py):

Rule 1 (busy): a connection is *busy* from a complete request to its reply being handed to
the socket, including the wait for its commit (fsync). It is *idle* between requests, while
it waits for input, and while it waits for data that may never come: a blocking read, a long
poll, a claim's wait, an SSE stream (`Waiter.wait` leaves the count for as long as it waits;
`idle()` below). The HTTP front counts each request, the RESP front each stretch of a
connection that a task drives (the reactor serves the rest synchronously: between two awaits
nothing is in flight), and a Lua script running past busy-reply-threshold until its writes are
written (scripting/service.py Rule 6; its client's connection waits as for a blocking command).
Rule 2 (order): 1. `/v0/ready` says 503 `shutting_down` and both fronts stop accepting (the
listeners close; a new connection is refused by the kernel); 2. the busy requests get up to
`shutdown_grace_s` to finish, so a write waiting for its fsync is answered rather than cut;
3. everything left (idle connections, blocked readers, streams, requests past the grace) is
cancelled; 4. storage flushes and fsyncs the WAL and writes the final checkpoint (server.py,
shielded from the cancel). Engine operations are synchronous, so a cancel never leaves a write
half applied: a request cut at step 3 either happened whole (and is flushed at step 4) or not.
Rule 3: a second signal during the grace stops waiting at once (an operator's Ctrl-C twice).
Rule 4 (ownership): only the request's own task, or a task of a nursery nested inside it (the
long poll's `serve`), may leave the request for a wait (`idle()`). A task spawned meanwhile into
a longer-lived nursery (a router worker created by `PUT /v0/routers/...`, a claim cohort)
inherits the request's context but not its count: its waits leave nothing, so the count is
never negative and the grace waits for the requests really in flight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import trio

log = logging.getLogger("topicsrv")

# the Drain that counts a task as busy, and that task (set by the HTTP front around a request);
# a task spawned meanwhile inherits the pair, and Rule 4 tells it apart by the task
_COUNTED: ContextVar[tuple[Drain, trio.lowlevel.Task] | None] = ContextVar(
    "topicsrv_drain_counted", default=None)


class Drain:
    __slots__ = ("busy", "draining", "_wake")

    def __init__(self) -> None:
        self.busy = 0
        self.draining = False
        self._wake: trio.Event | None = None  # set while a stop waits: the last leave, or Rule 3

    def enter(self) -> None:
        self.busy += 1

    def leave(self) -> None:
        self.busy -= 1
        if self.busy <= 0 and self._wake is not None:
            self._wake.set()

    @contextmanager
    def request(self) -> Iterator[None]:
        """Count the current task as busy for the body (Rule 1); a Waiter inside leaves."""
        self.enter()
        token = _COUNTED.set((self, trio.lowlevel.current_task()))
        try:
            yield
        finally:
            _COUNTED.reset(token)
            self.leave()

    async def shutdown(self, stop_accepting: Callable[[], None], grace_s: float,
                       cancel: Callable[[], None]) -> None:
        """Rule 2, steps 1-3 (the caller has set ctx.shutting_down)."""
        if self.draining:
            if self._wake is not None:
                self._wake.set()  # Rule 3
            return
        self.draining = True
        t0 = time.monotonic()
        stop_accepting()
        busy_at_start = self.busy
        if self.busy > 0:
            self._wake = trio.Event()
            with trio.move_on_after(grace_s):
                await self._wake.wait()
        finished = self.busy <= 0
        log.info("shutdown: stopped accepting; %d request(s) in flight %s in %.0f ms%s",
                 busy_at_start, "finished" if finished else "not finished",
                 (time.monotonic() - t0) * 1000,
                 "" if finished else f" ({self.busy} cancelled after the {grace_s:g} s grace)")
        cancel()


@contextmanager
def idle() -> Iterator[None]:
    """A wait for data that may never come: the current task is not busy meanwhile (Rule 1)."""
    counted = _COUNTED.get()
    if counted is None or not _within(counted[1]):  # Rule 4
        yield
        return
    drain = counted[0]
    drain.leave()
    token = _COUNTED.set(None)  # a nested wait does not leave twice
    try:
        yield
    finally:
        _COUNTED.reset(token)
        drain.enter()


def _within(owner: trio.lowlevel.Task) -> bool:
    """Is the current task `owner` or a descendant through nurseries nested in it (Rule 4)?"""
    task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    while task is not None:
        if task is owner:
            return True
        nursery = task.parent_nursery
        task = nursery.parent_task if nursery is not None else None
    return False
