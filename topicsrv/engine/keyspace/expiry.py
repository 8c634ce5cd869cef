"""The one expiry index of the keyspace: key -> absolute deadline (ms), strings and topics alike.

Rule 1: `deadlines` is the truth; `heap` orders (deadline, key) pairs and may hold stale pairs
(a key whose deadline changed or was removed): a pair is acted on only when it still matches
`deadlines`, and stale pairs are dropped as they surface, so every change is O(log n).
Rule 2 (bounded work): `due(now, budget)` pops at most `budget` heap pairs per call, so the
active expiry tick costs O(budget log n) whatever the number of keys; it never scans the map.
The heap is rebuilt from `deadlines` when stale pairs outnumber live ones (amortised O(1)).
Rule 3: deadlines are absolute Unix milliseconds from topicsrv.clock, so they survive restarts.
"""

from __future__ import annotations

import heapq


class ExpiryIndex:
    __slots__ = ("deadlines", "heap")

    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}
        self.heap: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self.deadlines)

    def get(self, key: str) -> int | None:
        return self.deadlines.get(key)

    def set(self, key: str, deadline: int) -> None:
        if self.deadlines.get(key) == deadline:
            return
        self.deadlines[key] = deadline
        heapq.heappush(self.heap, (deadline, key))
        if len(self.heap) > 2 * len(self.deadlines) + 64:
            self._rebuild()

    def clear(self, key: str) -> None:
        self.deadlines.pop(key, None)

    def reset(self) -> None:
        self.deadlines.clear()
        self.heap.clear()

    def _rebuild(self) -> None:
        self.heap = [(d, k) for k, d in self.deadlines.items()]
        heapq.heapify(self.heap)

    def due(self, now: int, budget: int) -> list[str]:
        """Keys whose deadline is <= now, at most `budget` heap pops (Rule 2). The caller
        deletes them (and so clears their deadlines)."""
        out: list[str] = []
        heap, deadlines = self.heap, self.deadlines
        while heap and budget > 0 and heap[0][0] <= now:
            deadline, key = heapq.heappop(heap)
            budget -= 1
            if deadlines.get(key) == deadline:
                out.append(key)
        return out

    def avg_ttl(self, now: int) -> int:
        """INFO keyspace's avg_ttl (ms): the mean remaining TTL of the keys with one. Redis
        estimates it from samples; this averages at most 1000 of the soonest deadlines."""
        if not self.deadlines:
            return 0
        sample = heapq.nsmallest(1000, self.deadlines.values()) if len(self.deadlines) > 1000 \
            else list(self.deadlines.values())
        return max(0, sum(d - now for d in sample) // len(sample))
