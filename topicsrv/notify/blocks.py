"""A blocked command as a value: a served waiter with a timeout and an adapter, no task.

A blocking command (XREAD/XREADGROUP BLOCK, TOPIC.CLAIM BLOCK) that finds nothing returns a
`Block` instead of a coroutine. The Block waits where it was made (Rule 1) and is served by
the notifier (package Rule 9); the I/O adapter only resumes the session with its result:

    block = Block(notifier, serve=attempt, lines=[...], timeout_s=..., timeout_result=...)
    # the reactor:            block.attach(on_done, alive)  ... on_done: block.hand()
    # a connection's task:    result = await block

Rule 1: a Block waits (arms, or parks in its lines) when it is made, in the command's own step:
no change can slip between the command's read and the wait (package Rule 1).
Rule 2: it ends once, with one of: its result (served), `timeout_result` (its BLOCK timeout, a
runner timer), the result `unblock()` gives (CLIENT UNBLOCK), or nothing (`close()`: the
client left, was killed, or the command ran where it may not block). A result produced but never handed to the session (`hand()`), or handed to a
session whose client then left (`abandon()`), is given back (`give_back`, e.g. a claim's
leases released at once): nothing goes to a client that is gone (package Rule 12).
Rule 3: `alive()`, the adapter's check that its client is still connected, runs just before
each attempt of a consumer (a fan-out reader takes nothing from anyone: it is not asked); a
client found gone gets nothing, and its place and turn pass on.
Rule 4: `recheck()` (seconds, or None) is asked whenever the Block starts or goes back to
waiting: a Block that may find something without a change (XREADGROUP ... CLAIM, an idle entry
becoming claimable) is made ready again then.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

import trio

from topicsrv.notify.waiter import NOTHING, Serve, Waiter

if TYPE_CHECKING:
    from topicsrv.notify.lines import Line
    from topicsrv.notify.runner import Timer
    from topicsrv.notify.scheduler import Notifier


class Block(Waiter):
    __slots__ = ("work", "timeout_s", "timeout_result", "timer", "alive", "give_back",
                 "recheck", "ripe_timer", "handed", "closed", "started")

    def __init__(self, sched: Notifier, serve: Serve, *, topics: Sequence[str] = (),
                 lines: Sequence[Line] = (), demand: int = 1, timeout_s: float | None = None,
                 timeout_result: Any = None,
                 recheck: Callable[[], float | None] | None = None) -> None:
        super().__init__(sched, topics, self._attempt, lines, max(1, demand))
        self.work = serve
        self.timeout_s = timeout_s
        self.timeout_result = timeout_result
        self.timer: Timer | None = None
        self.alive: Callable[[], bool] | None = None
        self.give_back: Callable[[], None] | None = None  # set by an attempt that took something
        self.recheck = recheck
        self.ripe_timer: Timer | None = None
        self.handed = False
        self.closed = False
        self.started = False
        self.arm()  # Rule 1
        try:
            self._start()
        except RuntimeError:  # made outside a trio run (a sans-IO test): when it is awaited
            pass

    def _start(self) -> None:
        """The timers: BLOCK's timeout (Rule 2) and the first recheck (Rule 4)."""
        if self.timeout_s is not None:
            self.timer = self._sched.runner.at(trio.current_time() + max(0.0, self.timeout_s),
                                               self._expire)
        self.waiting_again()
        self.started = True

    # ---- the notifier's side ---------------------------------------------------------------

    def _attempt(self) -> Any:
        alive = self.alive
        if alive is not None and self.lines and not alive():  # Rule 3: the adapter closed it
            self.close()
            return NOTHING
        return self.work()

    def waiting_again(self) -> None:
        """Rule 4."""
        if self.recheck is None:
            return
        runner = self._sched.runner
        runner.cancel(self.ripe_timer)
        self.ripe_timer = None
        after = self.recheck()
        if after is not None:
            self.ripe_timer = runner.at(trio.current_time() + after, self._ripe)

    def _ripe(self) -> None:
        self.ripe_timer = None
        s = self._sched
        if self.closed or self.result is not NOTHING or self.fired:
            return
        if self.parked:
            s.lines._unpark(self)
        s._fire(self, self.lines[0].name if self.lines else self.topics[0])

    def _expire(self) -> None:
        self.timer = None
        if not self.closed and self.result is NOTHING:
            self._end(self.timeout_result)
            self._resume()

    def unblock(self, result: Any = NOTHING) -> bool:
        """End the wait now with `result` (the timeout's by default), as CLIENT UNBLOCK does;
        the adapter hears of it from the runner. False when the wait has ended already."""
        if self.closed or self.result is not NOTHING:
            return False
        self._end(self.timeout_result if result is NOTHING else result)
        self._sched.runner.at(0.0, self._resume)
        return True

    def _end(self, result: Any) -> None:
        Waiter.close(self)  # out of every line and topic; an admission not served checks in
        self.result = result
        self.finished()

    def finished(self) -> None:
        """The Block has its result (served or timed out); the scheduler calls it before the
        adapter is told. Subclasses count the call here."""
        self._stop()

    def _stop(self) -> None:
        runner = self._sched.runner
        runner.cancel(self.timer)
        runner.cancel(self.ripe_timer)
        self.timer = self.ripe_timer = None

    def _resume(self) -> None:
        done = self.on_done
        if done is not None:
            done()
        elif self._ev is not None:
            self._ev.set()

    # ---- the adapter's side ----------------------------------------------------------------

    def attach(self, on_done: Callable[[], None], alive: Callable[[], bool] | None = None) -> None:
        """A taskless adapter takes the Block: `on_done()` once it has its result (from the
        runner: never inside the caller's step), `alive()` before each attempt (Rule 3)."""
        self.on_done = on_done
        self.alive = alive
        if not self.started:
            self._start()
        if self.result is not NOTHING:
            self._sched.runner.at(0.0, on_done)

    def hand(self) -> Any:
        """The result, now the session's to send (Rule 2)."""
        self.handed = True
        return self.result

    def __await__(self) -> Generator[Any, None, Any]:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        """A connection's task waits for the result; the turn then ends when the connection
        has written the reply (package Rule 8). A Block closed because its client is gone
        waits until the connection's read sees the end and cancels this wait."""
        if self.result is NOTHING:
            if not self.started:
                self._start()
            ev = self._ev
            if ev is None:
                ev = self._ev = trio.Event()
            await ev.wait()
        self._end_turn_at_write()
        return self.hand()

    def close(self) -> None:
        """Rule 2: the client left, was killed, or the command may not block here."""
        if self.closed:
            return
        self.closed = True
        self._stop()
        Waiter.close(self)
        if self.result is NOTHING:
            self.finished_unserved()
        elif not self.handed:
            self._give()

    def abandon(self) -> None:
        """The result was handed to a session that will never send it (its client left)."""
        self.close()
        self._give()

    def finished_unserved(self) -> None:
        """Hook: the Block ended without a result (subclasses count the call)."""

    def _give(self) -> None:
        give, self.give_back = self.give_back, None
        if give is not None:
            give()
