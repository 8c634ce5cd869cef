"""Write and read rates per topic, sampled: the status page's sparklines and the ranking that
bounds per-topic metrics.

Rule 1: nothing is counted on the write or read path. Every `slot_s` the sampler reads each
topic's own lifetime counters (`appended_total`, `read_total`, a queue's `claimed`) and stores
the difference in the topic's ring: writes = records appended (client writes and router
copies), reads = records delivered by reads (diff, SSE, XREAD, XREADGROUP) plus jobs claimed.
Rule 2: memory is bounded. A topic's ring (SLOTS counts of writes and reads) exists only while
the topic had activity inside the window, and at most `max_rings` rings exist; a topic past
that keeps only its last slot (a rate without a sparkline). A topic deleted takes its state
with it (it lives in `topic.ext`).
Rule 3: a topic the sampler meets for the first time once the server is ready starts from
zero (its whole lifetime is recent); a topic met before (at the first sweep, or while recovery
was still installing topics) starts from its counters then: what recovery restored is not a
rate.
Rule 4: `top(n)` ranks by activity inside the window (plus what happened since the last
sweep, so a topic written a moment ago ranks), then by bytes, then by name; it is what /metrics
and /v0/status show by name, the rest go into one aggregate.
Rule 5: a rate is records/s averaged over the latest slots covering about RATE_WINDOW_S.
Rule 6: pure except `run`, the trio task that calls `sweep` on a timer (started by the HTTP
front); `sweep` costs O(topics) every `slot_s`, nothing per request.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.topic import Topic

KEY = "activity"
SLOTS = 60
MAX_RINGS = 10_000
RATE_WINDOW_S = 10.0  # a rate is the mean over the latest slots covering about this long
U32 = (1 << 32) - 1


class Track:
    """One topic's sampler state (Rule 2)."""

    __slots__ = ("prev_w", "prev_r", "last_w", "last_r", "ring_w", "ring_r", "sum_w", "sum_r")

    def __init__(self, prev_w: int, prev_r: int) -> None:
        self.prev_w, self.prev_r = prev_w, prev_r
        self.last_w = self.last_r = 0  # the last slot's counts
        self.ring_w: array[int] | None = None
        self.ring_r: array[int] | None = None
        self.sum_w = self.sum_r = 0  # over the ring (the window)


def reads_of(topic: Topic) -> int:
    n: int = getattr(topic, "read_total", 0)
    qs = topic.ext.get("queue")
    if qs is not None:
        n += int(getattr(qs, "stats", {}).get("claimed", 0))
    return n


@dataclass(frozen=True, slots=True)
class Rates:
    """A topic's (or the server's) recent activity, for the status page."""

    write_rate: float  # records/s over the latest RATE_WINDOW_S (the last slot without a ring)
    read_rate: float
    writes: list[int]  # per slot, oldest first (empty: no sparkline kept)
    reads: list[int]


@dataclass
class Activity:
    slot_s: float = 5.0
    slots: int = SLOTS
    max_rings: int = MAX_RINGS
    pos: int = 0  # the ring slot the last sweep wrote
    sweeps: int = 0
    rings: int = 0
    last_span_s: float = 0.0  # the real length of the last slot
    last_at: float | None = None
    total_w: array[int] = field(default_factory=lambda: array("Q"))
    total_r: array[int] = field(default_factory=lambda: array("Q"))

    def __post_init__(self) -> None:
        self.total_w = array("Q", bytes(8 * self.slots))
        self.total_r = array("Q", bytes(8 * self.slots))

    # ---- sampling -------------------------------------------------------------------------

    def sweep(self, engine: Engine, now_s: float, ready: bool = True) -> None:
        """Close one slot: the counts since the last sweep go into every active topic's ring."""
        first = self.last_at is None or not ready
        last = self.last_at
        self.last_span_s = self.slot_s if last is None else max(1e-3, now_s - last)
        self.last_at = now_s
        pos = self.pos = (self.pos + 1) % self.slots
        tw = tr_ = 0
        for topic in engine.topics.values():
            dw, dr = self._sample(topic, pos, first)
            tw += dw
            tr_ += dr
        self.total_w[pos], self.total_r[pos] = tw, tr_
        self.sweeps += 1

    def _sample(self, topic: Topic, pos: int, first: bool) -> tuple[int, int]:
        ext = topic.ext
        w, r = topic.appended_total, reads_of(topic)
        tr: Track | None = ext.get(KEY)
        if tr is None:
            tr = ext[KEY] = Track(w, r) if first else Track(0, 0)
        dw, dr = max(0, w - tr.prev_w), max(0, r - tr.prev_r)
        tr.prev_w, tr.prev_r = w, r
        tr.last_w, tr.last_r = dw, dr
        ring_w, ring_r = tr.ring_w, tr.ring_r
        if ring_w is None or ring_r is None:
            if not (dw or dr) or self.rings >= self.max_rings:
                return dw, dr
            ring_w = tr.ring_w = array("I", bytes(4 * self.slots))
            ring_r = tr.ring_r = array("I", bytes(4 * self.slots))
            self.rings += 1
        dw, dr = min(dw, U32), min(dr, U32)
        tr.sum_w += dw - ring_w[pos]
        tr.sum_r += dr - ring_r[pos]
        ring_w[pos], ring_r[pos] = dw, dr
        if not (tr.sum_w or tr.sum_r):  # a whole window without activity: free the ring
            tr.ring_w = tr.ring_r = None
            self.rings -= 1
        return dw, dr

    async def run(self, engine: Engine, ready: Callable[[], bool] = lambda: True, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.sweep(engine, trio.current_time(), ready())
        task_status.started()
        while True:
            await trio.sleep(self.slot_s)
            self.sweep(engine, trio.current_time(), ready())

    # ---- reading --------------------------------------------------------------------------

    def _ordered(self, ring: array[int]) -> list[int]:
        cut = self.pos + 1
        return [*ring[cut:], *ring[:cut]]

    @property
    def rate_slots(self) -> int:
        """How many of the latest slots a rate averages: about RATE_WINDOW_S, at least one."""
        return max(1, min(self.slots, round(RATE_WINDOW_S / self.slot_s)))

    def _rate(self, series: list[int]) -> float:
        k = self.rate_slots
        return sum(series[-k:]) / (k * self.slot_s)

    def rates(self, topic: Topic) -> Rates:
        tr: Track | None = topic.ext.get(KEY)
        if tr is None:
            return Rates(0.0, 0.0, [], [])
        if tr.ring_w is None or tr.ring_r is None:  # no ring (Rule 2): the last slot only
            span = self.last_span_s or self.slot_s
            return Rates(tr.last_w / span, tr.last_r / span, [], [])
        writes, reads = self._ordered(tr.ring_w), self._ordered(tr.ring_r)
        return Rates(self._rate(writes), self._rate(reads), writes, reads)

    def server_rates(self) -> Rates:
        writes, reads = self._ordered(self.total_w), self._ordered(self.total_r)
        return Rates(self._rate(writes), self._rate(reads), writes, reads)

    def score(self, topic: Topic) -> int:
        """Rule 4's activity: the window's counts plus what happened since the last sweep."""
        tr: Track | None = topic.ext.get(KEY)
        if tr is None:
            return topic.appended_total + reads_of(topic)
        window = tr.sum_w + tr.sum_r if tr.ring_w is not None else tr.last_w + tr.last_r
        return window + max(0, topic.appended_total - tr.prev_w) + max(0, reads_of(topic) - tr.prev_r)

    def top(self, engine: Engine, n: int) -> tuple[list[Topic], list[Topic]]:
        """(the `n` most active topics, most active first; the rest, in name order)."""
        topics: list[Topic] = list(engine.topics.values())
        if len(topics) <= n:
            best, rest = topics, []
        else:
            best = heapq.nlargest(n, topics, key=lambda t: (self.score(t), t.bytes))
            chosen = {id(t) for t in best}
            rest = [t for t in topics if id(t) not in chosen]
        best.sort(key=lambda t: (-self.score(t), -t.bytes, t.name))
        return best, rest
