"""One waiting consumer (`Waiter`) and a connection's report that its replies are written
(`Delivery`). The rules are the package's (topicsrv/notify/__init__.py); this module holds a
waiter's own state, the scheduler (scheduler.py) and the lines (lines.py) move it.

A waiter is one of four kinds, fixed when it is made:
  - fan-out, task: `topics`, no `serve` (SSE watches, long polls, routers): every change of a
    topic wakes its task, which reads (Rule 2);
  - fan-out, served: `topics` and `serve` (XREAD BLOCK): every change of a topic makes it
    ready, and the scheduler calls `serve` when it is admitted (Rule 9);
  - consumer, served: `lines` and `serve` (XREADGROUP BLOCK, TOPIC.CLAIM BLOCK, a claim's
    `wait_ms`): it waits in the FIFO line of each key and is made ready only when the key
    holds something for it (Rule 10), then served at admission;
  - consumer, task: `lines`, no `serve` (a `/v0/work` stream, a claim on a cohort queue): made
    ready as a served consumer, but its task attempts itself and reports after the attempt:
    `took()` when it got something; waiting again or leaving without it means it came back
    empty (Rule 11).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import trio

from topicsrv.lifecycle import idle

if TYPE_CHECKING:
    from topicsrv.notify.lines import Line
    from topicsrv.notify.scheduler import Notifier


class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Final = _Nothing()  # `serve` found nothing for this waiter (it came back empty)
UNLIMITED: Final = 1 << 60  # the demand of a consumer that takes all there is (COUNT 0)

Serve = Callable[[], Any]  # a served waiter's attempt: NOTHING, or its result


class Waiter:
    """One waiting consumer (the package docstring, and the kinds above)."""

    __slots__ = ("_sched", "topics", "_ev", "fired", "topic", "ready_at", "ready_t", "_go",
                 "pass_no", "admitted", "turn", "_armed", "serve", "result", "on_done",
                 "lines", "demand", "counted", "ticket", "gen", "parked", "fired_by", "fired_at")

    def __init__(self, sched: Notifier, topics: Sequence[str], serve: Serve | None = None,
                 lines: Sequence[Line] = (), demand: int = 1) -> None:
        self._sched = sched
        self.topics = tuple(topics)
        # a task waiter's wake-up; a served waiter's result, made only when a task awaits it
        self._ev: trio.Event | None = trio.Event() if serve is None else None
        self.fired = False
        self.topic = ""  # the topic that woke it (the best one, for a multi-topic waiter)
        self.ready_at = 0  # engine clock ms, for aging
        self.ready_t = 0.0  # perf_counter, for the latency histogram
        self._go: trio.Event | None = None
        self.pass_no = -1  # the pass that admitted it last
        self.admitted = -1  # the step of an admission whose turn has not started yet
        self.turn = -1  # the step of the turn in progress (Rule 2)
        self._armed = False
        self.serve = serve  # Rule 9; None once a served waiter is done
        self.result: Any = NOTHING  # what `serve` returned
        self.on_done: Callable[[], None] | None = None  # a taskless adapter's resume (Rule 9)
        self.lines: tuple[Line, ...] = tuple(lines)  # Rule 10
        self.demand = demand  # units (entries, jobs) one attempt takes at most
        self.counted = 0  # the demand its line counts in flight for it, until it reports
        self.ticket = -1  # its place in its lines (kept when it comes back empty)
        self.gen = 0  # bumped when it leaves its lines: their older entries are stale
        self.parked = False
        self.fired_by: Line | None = None  # the line that made it ready, until it reports
        self.fired_at = 0  # the notifier's change count when it was made ready

    @property
    def serving(self) -> bool:
        """Admitted, and its turn not over yet."""
        return self.turn >= 0 or self.admitted >= 0

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _take(self) -> None:
        """The admission becomes the turn (a turn still open from before ends here)."""
        if self.turn >= 0:
            self._sched._checkin(self.turn)
        self.turn, self.admitted = self.admitted, -1

    def arm(self) -> None:
        """Register for the next change of any topic, or take a place in the lines (Rule 1).
        A task consumer made ready keeps its turn in its line until it reports (Rule 11)."""
        s = self._sched
        if self.fired:
            s._unready(self)
            self.fired = False
            if self.serve is None:
                self._ev = trio.Event()
        if self.admitted >= 0:  # admitted while not waiting (a stream's heartbeat): it reads now
            self._take()
        if self.lines:
            if self.fired_by is None and not self.parked:
                s.lines.park(self)
            return
        if not self._armed:
            self._armed = True
            by_topic = s._by_topic
            for t in self.topics:
                w = by_topic.get(t)
                if w is None:
                    by_topic[t] = {self: None}
                else:
                    w[self] = None

    def waiting_again(self) -> None:
        """Hook: a served waiter came back empty and waits on (blocks.py sets its recheck)."""

    def finished(self) -> None:
        """Hook: a served waiter has its result, its adapter is told next (blocks.py)."""

    def took(self) -> None:
        """A task consumer's attempt got something (Rule 11): it gives up its place (it waits
        at the end of the line next time) and its line may serve the next."""
        if self.fired_by is not None:
            self._sched.lines.came_back(self, True)
        elif not self.parked:
            self.ticket = -1

    def delivered(self) -> None:
        """What this turn read is handed to the socket (a stream's frames sent, a router's
        forward done, a taskless reply sent): the turn is over (Rule 8)."""
        if self.turn >= 0:
            turn, self.turn = self.turn, -1
            self._sched._delivered(turn, self.pass_no, self.topic)

    def _end_turn_at_write(self) -> None:
        """The turn in progress ends when the current task's connection has written the reply
        (its Delivery), or now when there is none (Rule 8)."""
        if self.turn < 0:
            return
        s = self._sched
        turn, self.turn = self.turn, -1
        d = None
        if (turn == s._stage and s._steps_wait) or s.trace is not None:
            d = _DELIVERY.get()
        if d is not None and d.writes_for_me():
            d.held.append((s, turn, self.pass_no, self.topic))
        else:
            s._checkin(turn)

    def close(self) -> None:
        s = self._sched
        if self.fired:
            s._unready(self)
            self.fired = False
        if self.admitted >= 0:  # admitted, but it leaves before its turn
            s._checkin(self.admitted)
            self.admitted = -1
        self._end_turn_at_write()  # its reply is still to be written: the connection says when
        self.serve = None
        self._disarm()
        if self.lines:
            s.lines.leave(self)

    def _disarm(self) -> None:
        """Out of every topic's set (a fired multi-topic waiter may still sit in the others)."""
        s = self._sched
        self._armed = False
        for t in self.topics:
            w = s._by_topic.get(t)
            if w is not None:
                w.pop(self, None)
                if not w:
                    del s._by_topic[t]

    async def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a change of one of the topics, at most `timeout_s`; True once admitted (a
        served waiter: once served, its result in `result`). Waiting again ends the turn in
        progress (nothing more was sent in it)."""
        if self.turn >= 0:
            turn, self.turn = self.turn, -1
            self._sched._checkin(turn)
        if self.serve is not None or self.result is not NOTHING:
            return await self._wait_result(timeout_s)
        if self.lines and self.fired_by is not None:  # it waits again: it came back empty
            self._sched.lines.came_back(self, False)  # (Rule 11)
            self._sched.lines.park(self)
        if not self.fired:
            if timeout_s is not None and timeout_s <= 0:
                return False
            ev = self._ev
            assert ev is not None
            with trio.move_on_after(float("inf") if timeout_s is None else timeout_s), idle():
                await ev.wait()  # not a request in flight meanwhile (lifecycle Rule 1)
            if not self.fired:
                return False
        await self._sched._admit(self)
        self._take()
        return True

    async def _wait_result(self, timeout_s: float | None) -> bool:
        if self.result is NOTHING and self.serve is not None:
            if timeout_s is not None and timeout_s <= 0:
                return False
            ev = self._ev
            if ev is None:
                ev = self._ev = trio.Event()
            with trio.move_on_after(float("inf") if timeout_s is None else timeout_s), idle():
                await ev.wait()
        return self.result is not NOTHING


class Delivery:
    """A connection's report that the replies of the turns it holds are handed to the socket
    (Rule 8); `delivery()` makes one for the current task."""

    __slots__ = ("held", "owner")

    def __init__(self) -> None:
        self.held: list[tuple[Notifier, int, int, str]] = []  # (scheduler, step, pass, topic)
        self.owner = trio.lowlevel.current_task()  # the connection's task

    def writes_for_me(self) -> bool:
        """The current task is the connection's, or one it started (a long poll's handler, an
        SSE stream): not a long-lived task that only inherited the context (a router worker
        started by an engine listener while the connection wrote)."""
        task = trio.lowlevel.current_task()
        if task is self.owner:
            return True
        nursery = task.parent_nursery
        return nursery is not None and nursery.parent_task is self.owner

    def done(self) -> None:
        """The replies are written (or never will be: the connection ended)."""
        if self.held:
            held, self.held = self.held, []
            for sched, step, pass_no, topic in held:
                sched._delivered(step, pass_no, topic)


_DELIVERY: ContextVar[Delivery | None] = ContextVar("topicsrv_delivery", default=None)


def delivery() -> Delivery:
    """A Delivery for the current task and the tasks it starts from now on (Rule 8)."""
    d = Delivery()
    _DELIVERY.set(d)
    return d
