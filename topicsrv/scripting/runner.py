"""Where a script runs: one worker thread, with every command it calls executed on the loop
thread (the engine's one thread) and nothing else running meanwhile.

Why a thread: a Lua script cannot give the trio loop a turn in the middle (Lua 5.1 hooks
cannot yield), yet a script running past `busy-reply-threshold` must let the server answer
other clients `-BUSY` and accept SCRIPT KILL, as Redis does. So the Lua code runs on the
worker thread and the loop thread serves it:

Rule 1 (atomic, the usual case): `execute` hands the job to the worker and then BLOCKS the
loop thread (synchronously, inside the EVAL command) serving the script's `redis.call`s one
by one from `Job.to_loop`, until the script is done. No other task of either front, no
timer and no storage writer runs meanwhile: the script is one engine step.
Rule 2 (busy): if the script is still running at the threshold, the loop thread stops
blocking (`detached`): EVAL returns an awaitable (the session waits for it as for a blocking
command), `on_busy(text)` publishes the BUSY text, which the dispatcher answers to every
command but the `allow_busy` ones (SCRIPT KILL, FUNCTION KILL, SHUTDOWN, ...), and the
script's later `redis.call`s run on the loop thread through `trio.from_thread.run_sync`.
The switch is decided under `Job.lock`, so each call goes exactly one of the two ways and no
call is lost. At the end `on_busy(None)`.
Rule 3: commands always run on the loop thread (trio events, the WAL's batches and the
engine's waiters are the loop's), never on the worker.
Rule 4: without a running trio loop (unit tests) there is no BUSY phase: the loop thread
serves the script until it ends.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import trio

_DONE = object()


class _Call:
    __slots__ = ("fn", "result", "error", "event")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.event = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # handed back to the worker, raised there
            self.error = e
        self.event.set()


class Job:
    __slots__ = ("work", "to_loop", "lock", "detached", "token", "finished", "result",
                 "error", "started", "on_busy")

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.to_loop: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.detached = False
        self.token: Any = None
        self.finished: trio.Event | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.on_busy: Callable[[str | None], None] = lambda text: None

    def call(self, fn: Callable[[], Any]) -> Any:
        """Worker side: run `fn` on the loop thread (Rules 1-3)."""
        with self.lock:
            c = None if self.detached else _Call(fn)
            if c is not None:
                self.to_loop.put(c)
        if c is None:
            return trio.from_thread.run_sync(fn, trio_token=self.token)
        c.event.wait()
        if c.error is not None:
            raise c.error
        return c.result

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Runner:
    """The worker thread and the job running on it (at most one)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.current: Job | None = None

    def _worker(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job.result = job.work()
            except BaseException as e:
                job.error = e
            with job.lock:
                if not job.detached:
                    job.to_loop.put(_DONE)
                    continue
            job.token.run_sync_soon(self._finish, job)

    def _finish(self, job: Job) -> None:
        """Loop thread: a detached job ended (even if its client went away meanwhile)."""
        self.current = None
        job.on_busy(None)
        assert job.finished is not None
        job.finished.set()

    def execute(self, work: Callable[[], Any], threshold: float,
                on_busy: Callable[[str | None], None], busy_text: str) -> Any:
        """Run `work` on the worker; its result, or an awaitable of it past `threshold`."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._worker, name="topicsrv-lua", daemon=True)
            self.thread.start()
        job = Job(work)
        try:
            job.token = trio.lowlevel.current_trio_token()
            job.finished = trio.Event()
        except RuntimeError:  # Rule 4
            threshold = float("inf")
        self.current = job
        self.jobs.put(job)
        deadline = job.started + threshold
        while True:
            left = deadline - time.monotonic()
            try:
                msg = job.to_loop.get(timeout=min(left, 3600.0)) if left > 0 else \
                    job.to_loop.get_nowait()
            except queue.Empty:
                with job.lock:
                    if job.to_loop.empty():
                        job.detached = True
                        break
                continue
            if msg is _DONE:
                self.current = None
                return job.outcome()
            msg.run()
        job.on_busy = on_busy
        on_busy(busy_text)
        return _wait(job)


async def _wait(job: Job) -> Any:
    assert job.finished is not None
    await job.finished.wait()
    return job.outcome()
