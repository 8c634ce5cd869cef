"""A WAL shard's I/O thread: one long-lived thread that runs the shard's blocking calls
(writev + fdatasync, ftruncate, opening the next generation), fed by a queue (issue 16).

Rule 1: `call(fn, *args)` hands `fn` to the thread at once and parks the calling trio task
until the thread hands the result back through the run's TrioToken; the task is not
cancellable meanwhile (as `trio.to_thread.run_sync`: the call always completes and its
outcome is always seen). An exception in `fn` is raised in the caller.
Rule 2: calls run one at a time, in the order they were made.
Rule 3: the thread is started by the first call, ends after IDLE_S without work or once
`stop()` was called and its queue is empty, and is started again by the next call: no
thread outlives its storage by more than IDLE_S, nothing needs joining.
Why not `trio.to_thread.run_sync`: per call it takes a CapacityLimiter and yields to the
scheduler before the thread starts; measured, that costs ~110 µs of loop CPU per call
against ~60 µs here, and at 64 fsync-class writers the loop is the bottleneck
(docs/performance.md, "WAL shards and the I/O thread").
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

IDLE_S = 10.0  # as trio's own thread cache


class _Job:
    __slots__ = ("fn", "args", "token", "task", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.token = trio.lowlevel.current_trio_token()
        self.task = trio.lowlevel.current_task()
        self.result: Any = None
        self.error: BaseException | None = None


def _no_abort(_: Any) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


class IoThread:
    def __init__(self, name: str, idle_s: float = IDLE_S) -> None:
        self.name = name
        self.idle_s = idle_s
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._alive = False
        self.thread: threading.Thread | None = None  # the latest one started

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        job = _Job(fn, args)
        with self._lock:
            self._jobs.put(job)
            if not self._alive:
                self._alive = True
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()
        await trio.lowlevel.wait_task_rescheduled(_no_abort)
        if job.error is not None:
            raise job.error
        return job.result

    def stop(self) -> None:
        """Let the thread end once its queue is empty (Rule 3)."""
        self._jobs.put(None)

    @property
    def alive(self) -> bool:
        return self._alive

    def _run(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.idle_s)
            except queue.Empty:
                job = None
            if job is None:
                with self._lock:  # a call made meanwhile finds _alive set, or its job here
                    if self._jobs.empty():
                        self._alive = False
                        return
                continue
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller (Rule 1)
                job.error = exc
            try:
                job.token.run_sync_soon(trio.lowlevel.reschedule, job.task)
            except trio.RunFinishedError:  # the run is gone: nobody waits any more
                pass
