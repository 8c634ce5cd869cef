"""Where a script runs: inline on the loop thread (the engine's one thread), inside a
greenlet, so a script that runs long can be suspended and resumed without a thread hop.

Why a greenlet: a Lua script cannot give the trio loop a turn in the middle (Lua 5.1 hooks
cannot yield a coroutine), yet a script running past `busy-reply-threshold` must let the
server answer other clients `-BUSY` and accept SCRIPT KILL, as Redis does. A greenlet saves
the C stack (Lua's frames and lupa's included) when it switches out, so the script's own
count hook (sandbox.lua Rule 3) and each `redis.call` can hand the loop back (`tick`):

Rule 1 (atomic, the usual case): `execute` switches into the runner's greenlet, which runs
the whole script on the loop thread, its `redis.call`s as plain function calls, and switches
back when it is done. Nothing else (no task of either front, no timer, no storage writer)
runs meanwhile: the script is one engine step, and it costs no thread hand-off.
Rule 2 (busy): `tick` (called by the count hook every 100,000 Lua instructions and before
each `redis.call`) switches back to the loop when the script is past the threshold. EVAL
then returns an awaitable (the session waits for it as for a blocking command), `on_busy`
publishes the BUSY text, which the dispatcher answers to every command but the `allow_busy`
ones (SCRIPT KILL, FUNCTION KILL, SHUTDOWN, ...), and a system task (busy.py `drive`, not the
client's: the script ends even if its client goes away) resumes the script for slices of
SLICE_S, giving the loop one turn (a checkpoint: its ready I/O is served) between slices.
Its `redis.call`s still run directly. At the end `on_busy(None)` and the waiters wake.
Rule 3: commands always run on the loop thread (trio events, the WAL's batches and the
engine's waiters are the loop's): there is no other thread.
Rule 4: without a running trio loop (unit tests) there is no BUSY phase: the script runs to
its end in one switch.
Rule 5: a greenlet belongs to the thread that made it: the runner makes its greenlet on first
use and again if it is used from another thread (tests run servers in threads). A greenlet
left suspended (the loop ended under a busy script) is kept referenced (`_PARKED`) so it is
never collected mid-script (collection would throw GreenletExit into the Lua code).
Rule 6: this module is compiled (buildinfo.HOT_MODULES: every EVAL switches in here); the
loop side of Rule 2, async, is busy.py's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import greenlet
import trio

from topicsrv.scripting.busy import drive, wait

SLICE_S = 0.01  # Rule 2: the script's share between two loop turns while busy
_PARKED: list[Any] = []  # Rule 5


class Job:
    __slots__ = ("work", "done", "result", "error", "started", "yield_at", "back",
                 "finished", "on_busy", "busy")

    def __init__(self, work: Callable[[], Any], threshold: float) -> None:
        self.work = work
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.yield_at = self.started + threshold  # when `tick` hands the loop back
        self.back: Any = None  # the greenlet that switched in (the loop's)
        self.finished: trio.Event | None = None
        self.on_busy: Callable[[str | None], None] = lambda text: None
        self.busy = False

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Runner:
    """The greenlet scripts run in and the job running in it (at most one)."""

    def __init__(self) -> None:
        self.glet: Any = None
        self.thread = 0
        self.current: Job | None = None

    def _body(self, job: Job) -> None:
        """The greenlet: runs jobs one after another, switching back after each."""
        while True:
            try:
                job.result = job.work()
            except greenlet.GreenletExit:
                raise
            except BaseException as e:
                job.error = e
            job.done = True
            job = job.back.switch()

    def tick(self) -> None:
        """Inside the script (Rule 2): hand the loop back if its time is up."""
        job = self.current
        if job is not None and time.monotonic() >= job.yield_at and \
                greenlet.getcurrent() is self.glet:
            job.back.switch()

    def execute(self, work: Callable[[], Any], threshold: float,
                on_busy: Callable[[str | None], None], busy_text: str) -> Any:
        """Run `work` in the greenlet: its result, or an awaitable of it past `threshold`."""
        if self.current is not None:
            raise RuntimeError("a script is already running")  # the dispatcher answers BUSY
        job = Job(work, threshold)
        if not trio.lowlevel.in_trio_run():  # Rule 4
            job.yield_at = float("inf")
        me = threading.get_ident()
        if self.glet is None or self.glet.dead or self.thread != me:
            if self.glet is not None and not self.glet.dead:
                _PARKED.append(self.glet)
            self.glet, self.thread = greenlet.greenlet(self._body), me
        self.current = job
        job.back = greenlet.getcurrent()
        self.glet.switch(job)  # first switch: starts _body / resumes its `back.switch()`
        if job.done:
            self.current = None
            return job.outcome()
        job.on_busy = on_busy
        job.busy = True
        job.finished = trio.Event()  # only a busy script is waited for: others make none
        on_busy(busy_text)
        trio.lowlevel.spawn_system_task(drive, self, job, name="topicsrv-lua-busy")
        return wait(job)

    def resume(self, job: Job) -> None:
        """One slice of a busy script (Rule 2, busy.py's loop side)."""
        job.back = greenlet.getcurrent()
        job.yield_at = time.monotonic() + SLICE_S
        self.glet.switch()

    def park(self) -> None:
        """The loop is ending under a busy script (Rule 5)."""
        _PARKED.append(self.glet)
        self.glet = None

    def ended(self, job: Job) -> None:
        """A busy script ended: its waiters wake (Rule 2)."""
        self.current = None
        job.on_busy(None)
        assert job.finished is not None
        job.finished.set()

