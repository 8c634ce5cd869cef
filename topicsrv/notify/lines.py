"""Consumer lines: per-key FIFO of waiting consumers, each key serving only as many of them as
it holds work for (the package's Rules 10-12; Redis's blocking keys, `blocked.c`).

A `Line` is one key's queue of consumers (a stream's consumer group, a queue topic, later a
list): a heap of (ticket, gen, waiter), the ticket fixing the place in line. Its `supply()`
is an upper bound on the units (entries, jobs) the key could give right now, 0 only when it
could give none; `due()` the engine time (ms) at which that may change without a write (a
lease deadline, a nack delay), or None.

Rule 1 (invariant): a line whose key holds something while consumers wait in it always has
one of them in flight (made ready, not reported yet), or is dirty (a refill comes at the end
of the step), or is exhausted and will be made dirty by the key's next change or its `due`.
Rule 2 (refill): `supply()` units, minus the demand of the consumers in flight, are handed
out from the head of the line: each consumer made ready counts its demand (COUNT, MAX; all for
COUNT 0) until it reports. A write of K units makes K consumers of demand 1 ready, not N.
Rule 3 (reports): a consumer that took something leaves its place (it joins at the end if it
waits again, as a Redis client that blocks again); one that came back empty keeps its place.
If nothing of its keys changed since it was made ready, the key is exhausted: nobody else
could take anything, so no one else is tried until the next change (or `due`); otherwise the
next in line is tried (its turn passes on). A consumer that leaves while in flight (timeout,
disconnect, cancel) passes its turn on the same way.
Rule 4: a line lives while a consumer waits in it or is in flight from it; stale heap entries
(consumers that left or were made ready) are dropped when they outnumber the live ones.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topicsrv.notify.scheduler import Notifier
    from topicsrv.notify.waiter import Waiter

log = logging.getLogger("topicsrv.notify")

Supply = Callable[[], int]
Due = Callable[[], "int | None"]


class Line:
    __slots__ = ("key", "name", "supply", "due", "heap", "live", "in_flight", "exhausted",
                 "changed_at", "due_at")

    def __init__(self, key: Hashable, name: str, supply: Supply, due: Due | None) -> None:
        self.key = key
        self.name = name  # the key the engine reports changes of
        self.supply = supply
        self.due = due
        self.heap: list[tuple[int, int, Waiter]] = []
        self.live = 0  # consumers waiting in line (valid heap entries)
        self.in_flight = 0  # the demand of the consumers made ready and not reported yet
        self.exhausted = False  # Rule 3: nobody is tried until the next change or `due`
        self.changed_at = 0  # the notifier's change count at the key's last change
        self.due_at = -1  # the engine time a due refill is set for (-1: none)


class Lines:
    """Every line of one notifier (the scheduler makes their consumers ready and serves them)."""

    def __init__(self, sched: Notifier) -> None:
        self.sched = sched
        self.by_key: dict[Hashable, Line] = {}
        self.by_name: dict[str, list[Line]] = {}
        self.dirty: dict[Line, None] = {}  # to refill at the end of the step, in change order
        self.tickets = 0

    def line(self, key: Hashable, name: str, supply: Supply, due: Due | None = None) -> Line:
        """The line of `key` (made by its first consumer, with that consumer's supply)."""
        line = self.by_key.get(key)
        if line is None:
            line = self.by_key[key] = Line(key, name, supply, due)
            self.by_name.setdefault(name, []).append(line)
        return line

    def parked_on(self, name: str) -> int:
        return sum(line.live for line in self.by_name.get(name, ()))

    def waiting(self) -> int:
        return sum(line.live for line in self.by_key.values())

    # ---- a consumer's moves ----------------------------------------------------------------

    def park(self, w: Waiter) -> None:
        """Into each of its lines, at the end (a new ticket) or back at its place."""
        if w.ticket < 0:
            self.tickets += 1
            w.ticket = self.tickets
        w.parked = True
        entry = (w.ticket, w.gen, w)
        if any(self.by_key.get(x.key) is not x for x in w.lines):
            w.lines = tuple(self._registered(x) for x in w.lines)
        for line in w.lines:
            heapq.heappush(line.heap, entry)
            line.live += 1
            if not line.exhausted:
                self._dirty(line)

    def _registered(self, line: Line) -> Line:
        """The live line of `line`'s key: a line dropped while its consumer was away (a job
        stream that left while full) is registered again."""
        cur = self.by_key.get(line.key)
        if cur is None:
            cur = self.by_key[line.key] = line
            self.by_name.setdefault(line.name, []).append(line)
        return cur

    def _unpark(self, w: Waiter) -> None:
        w.parked = False
        w.gen += 1
        for line in w.lines:
            line.live -= 1
            if len(line.heap) > 2 * line.live + 16:  # Rule 4
                line.heap = [e for e in line.heap if e[2].parked and e[1] == e[2].gen]
                heapq.heapify(line.heap)

    def came_back(self, w: Waiter, took: bool) -> None:
        """Rule 3: the report of a consumer made ready by `w.fired_by`."""
        line = w.fired_by
        if line is None:
            return
        w.fired_by = None
        line.in_flight -= w.counted
        if took:
            w.ticket = -1
            for x in w.lines:
                self._dirty(x)
            return
        for x in w.lines:
            if x.changed_at <= w.fired_at:
                self._exhaust(x)
            else:
                self._dirty(x)

    def leave(self, w: Waiter) -> None:
        """The consumer is done (served, timed out, cancelled): out of every line for good."""
        if w.parked:
            self._unpark(w)
        line = w.fired_by
        if line is not None:  # its turn passes on (Rule 3)
            w.fired_by = None
            line.in_flight -= w.counted
            for x in w.lines:
                self._dirty(x)
        for x in w.lines:
            if x.live <= 0 and x.in_flight <= 0 and self.by_key.get(x.key) is x:
                del self.by_key[x.key]
                same = self.by_name[x.name]
                same.remove(x)
                if not same:
                    del self.by_name[x.name]
                self.dirty.pop(x, None)

    # ---- the key's side --------------------------------------------------------------------

    def changed(self, name: str, count: int) -> None:
        for line in self.by_name[name]:
            line.changed_at = count
            line.exhausted = False
            self.dirty[line] = None
        self.sched.runner.kick()

    def due(self, line: Line) -> None:
        """A lease deadline or nack delay passed: the key may hold something again."""
        line.due_at = -1
        if line.exhausted:
            line.exhausted = False
            self._dirty(line)

    def _dirty(self, line: Line) -> None:
        if line not in self.dirty:
            self.dirty[line] = None
            self.sched.runner.kick()

    def _exhaust(self, line: Line) -> None:
        line.exhausted = True
        self.dirty.pop(line, None)
        self._set_due(line)

    def _set_due(self, line: Line) -> None:
        if line.due is None:
            return
        at = line.due()
        if at is None or (0 <= line.due_at <= at):
            return
        line.due_at = at
        self.sched.runner.at_engine_ms(at, lambda: self.due(line))

    def refill_dirty(self) -> bool:
        """Rule 2 for every dirty line, in the order their keys changed; True if any ran."""
        if not self.dirty:
            return False
        dirty, self.dirty = self.dirty, {}
        for line in dirty:
            if self.by_key.get(line.key) is line:
                try:
                    self.refill(line)
                except Exception:  # a bug in a supply: this line waits for its next change
                    log.exception("the consumer line %r could not be refilled", line.key)
        return True

    def refill(self, line: Line) -> None:
        if line.exhausted or line.live <= 0:
            return
        avail = line.supply()
        if avail <= 0:
            self._exhaust(line)
            return
        heap = line.heap
        fire = self.sched._fire
        while line.in_flight < avail and heap:
            _, gen, w = heapq.heappop(heap)
            if not w.parked or gen != w.gen:
                continue  # stale: it left, or another of its lines made it ready
            self._unpark(w)
            w.fired_by = line
            w.counted = min(w.demand, UNLIMITED_FLIGHT)
            line.in_flight += w.counted
            fire(w, line.name)


UNLIMITED_FLIGHT = 1 << 40  # a COUNT 0 consumer takes every unit (kept far from overflow)
