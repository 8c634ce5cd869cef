"""The notifier's own task: the end-of-step service and the timers (the package's Rule 9).

Rule 1 (end of step): a change that makes a served waiter ready, a dirty line or an admitted
served waiter `kick()`s the runner; it runs once the step that made the change is over (trio
runs one task at a time: the EXEC, the script, the reactor's pass, the HTTP handler's
synchronous part all finish first), then does everything the change allows at once
(Notifier._service, which goes on until nothing moves: a kick during the turn adds nothing),
as redis-server's `handleClientsBlockedOnKeys` after a command.
Rule 1b (the reactor's pass is a step): while the RESP reactor serves its ready sockets it
`hold`s the runner: a kick then only marks the work, and the reactor runs the turn itself
(`flush`) once the pass is over, in its own task: the usual case (a client's XADD serving a
blocked reader) costs no task switch.
Rule 2 (timers): one heap of (trio time, n, callback) for every served waiter's BLOCK timeout,
every line's `due` and every contended pass's tick; a cancelled entry keeps its place with no
callback and is dropped when the cancelled ones outnumber the rest. The runner sleeps until
the earliest entry or the next kick.
Rule 3: a system task of the current trio run, started at the first kick (a notifier has no
nursery of its own); nothing it runs may take the run down: an exception is logged and the
runner goes on.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from topicsrv.notify.scheduler import Notifier

log = logging.getLogger("topicsrv.notify")

Timer = list[Any]  # [trio time, n, callback or None when cancelled]


class Runner:
    def __init__(self, sched: Notifier) -> None:
        self.sched = sched
        self.alive = False  # the task exists in the current run
        self.kicked = False
        self.ev: trio.Event | None = None  # set by a kick while the task sleeps
        self.timers: list[Timer] = []
        self.n = 0
        self.cancelled = 0
        self.turns = 0
        self.hold = 0  # Rule 1b: a step in progress will flush

    def kick(self) -> None:
        """Run the service once the current step is over (Rule 1)."""
        if self.kicked:
            return
        self.kicked = True
        if self.hold:
            return  # Rule 1b
        ev = self.ev
        if ev is not None:
            ev.set()
        elif not self.alive:
            self._spawn()

    def _spawn(self) -> None:
        try:
            trio.lowlevel.spawn_system_task(self._run, name="topicsrv.notify.runner")
        except RuntimeError:  # not in a trio run (a synchronous test of the engine side)
            self.kicked = False
            return
        self.alive = True

    def at(self, when: float, fn: Callable[[], None]) -> Timer:
        """Call `fn` at trio time `when` (Rule 2); the entry cancels with `cancel`."""
        self.n += 1
        entry: Timer = [when, self.n, fn]
        heapq.heappush(self.timers, entry)
        if self.timers[0] is entry:  # earlier than what the runner sleeps until
            if self.ev is not None:
                self.ev.set()
            elif not self.alive:
                self._spawn()
        return entry

    def at_engine_ms(self, at_ms: int, fn: Callable[[], None]) -> Timer:
        """`at` for an engine-clock time (ms): after as long as the engine clock needs to get
        there, never less than 1 ms (a due time already reached is looked at once more)."""
        eng = self.sched.engine
        now = eng.now() if eng is not None else int(trio.current_time() * 1000)
        return self.at(trio.current_time() + max(0.001, (at_ms - now) / 1000), fn)

    def cancel(self, entry: Timer | None) -> None:
        if entry is None or entry[2] is None:
            return
        entry[2] = None
        self.cancelled += 1
        if self.cancelled > 64 and self.cancelled * 2 > len(self.timers):
            self.timers = [e for e in self.timers if e[2] is not None]
            heapq.heapify(self.timers)
            self.cancelled = 0

    def flush(self) -> None:
        """Rule 1b: the step that held the runner is over: its turn, here and now."""
        if self.kicked and not self.hold:
            self._turn()
            self.kicked = False

    def pending(self) -> int:
        return len(self.timers) - self.cancelled

    async def _run(self) -> None:
        try:
            while True:
                self.kicked = True  # a kick during the turn is work the service does anyway
                self._turn()
                self.kicked = False
                ev = self.ev = trio.Event()
                timers = self.timers
                with trio.move_on_at(timers[0][0] if timers else math.inf):
                    await ev.wait()
                self.ev = None
        finally:
            self.alive = False
            self.ev = None
            self.kicked = False
            self.timers = []
            self.cancelled = 0

    def _turn(self) -> None:
        self.turns += 1
        timers = self.timers
        now = trio.current_time()
        while timers and timers[0][0] <= now:
            fn = heapq.heappop(timers)[2]
            if fn is None:
                self.cancelled -= 1
                continue
            try:
                fn()
            except Exception:  # Rule 3
                log.exception("a notifier timer failed")
        try:
            self.sched._service()
        except Exception:  # Rule 3
            log.exception("the notifier's service failed")
