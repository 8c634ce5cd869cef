"""Waking waiters when a topic changes (long-poll diff, SSE, XREAD BLOCK, XREADGROUP BLOCK).

Rule 1: take the event *before* reading the engine, then await it only if the read came back
empty. The engine never yields, so no append can slip between the read and the wait.
Rule 2: every wait is bounded by a timeout or a cancel scope; events are dropped once fired,
so idle topics cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio


class Notifier:
    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}
        self.wakeups = 0

    def changed(self, topic: str) -> None:
        """Engine listener: `topic` was appended to, deleted from, trimmed, created or dropped."""
        ev = self._events.pop(topic, None)
        if ev is not None:
            self.wakeups += 1
            ev.set()

    def event(self, topic: str) -> trio.Event:
        ev = self._events.get(topic)
        if ev is None:
            ev = self._events[topic] = trio.Event()
        return ev

    def waiting_topics(self) -> int:
        return len(self._events)


async def wait_any(events: Iterable[trio.Event], timeout_s: float | None) -> bool:
    """Wait until any event fires or the timeout passes; True if one fired."""
    evs = list(events)
    if any(ev.is_set() for ev in evs):
        return True
    fired = False
    with trio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
        async with trio.open_nursery() as nursery:

            async def one(ev: trio.Event) -> None:
                nonlocal fired
                await ev.wait()
                fired = True
                nursery.cancel_scope.cancel()

            for ev in evs:
                nursery.start_soon(one, ev)
    return fired
