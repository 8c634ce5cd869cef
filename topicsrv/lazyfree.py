"""Lazy freeing: big containers a command is done with are released in slices between other
clients' events, instead of all at once inside the command's step (Redis's lazyfree, without
a thread: under the GIL a thread would hold the loop just the same).

Rule 1: `add(items)` takes the last reference the server keeps to a list (a 300,000-command
EXEC's queue, its converted argv lists, its reply): the list is emptied from its end,
`SLICE` elements per loop turn, so freeing its objects never stalls the other clients more
than one slice (bench/execstall.py, issue 23 item 7).
Rule 2: with no `run` task (in-process tests, tools) `add` keeps nothing: the caller's
reference goes and the list is freed at once, as before.
Rule 3: a small list (under SLICE elements) is not worth a turn: it is freed at once too.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import trio
import trio.lowlevel

SLICE = 20_000  # elements per loop turn (a 5-argument command: about 2 ms of deallocs)


class LazyFree:
    def __init__(self) -> None:
        self.pending: deque[list[Any]] = deque()
        self.running = False
        self._wake = trio.Event()
        self.freed = 0  # elements released so far (INFO memory `lazyfreed_objects`)

    def add(self, items: list[Any]) -> None:
        """Rule 1 (Rules 2-3: not kept)."""
        if self.running and len(items) > SLICE:
            self.pending.append(items)
            self._wake.set()

    def pending_count(self) -> int:
        """Elements still to release (INFO memory `lazyfree_pending_objects`)."""
        return sum(len(items) for items in self.pending)

    def step(self) -> None:
        """Release one slice of the oldest pending list."""
        items = self.pending[0]
        n = min(SLICE, len(items))
        del items[len(items) - n:]
        self.freed += n
        if not items:
            self.pending.popleft()

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                while self.pending:
                    self.step()
                    await trio.lowlevel.checkpoint()
        finally:
            self.running = False
            self.pending.clear()
