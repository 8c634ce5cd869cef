"""Write and read rates per topic, sampled: the status page's sparklines and the ranking that
bounds per-topic metrics.

Rule 1: nothing is counted on the read path and one set insert on the write path (`changed`,
an engine listener). Every `slot_s` the sampler reads each topic's own lifetime counters
(`appended_total`, `read_total`, a queue's `claimed`) and stores the difference in the topic's
ring: writes = records appended (client writes and router copies), reads = records delivered
by reads (diff, SSE, XREAD, XREADGROUP) plus jobs claimed.
Rule 2: memory is bounded. A topic's ring (`slots` counts of writes and reads) exists only
while the topic had activity inside the window, and at most `max_rings` rings exist; a topic
past that keeps only its last slot (a rate without a sparkline). A topic deleted takes its
state with it (it lives in `topic.ext`).
Rule 3: a topic the sampler meets for the first time once the server is ready starts from
zero (its whole lifetime is recent); a topic met before (at the first sweep, or while recovery
was still installing topics) starts from its counters then: what recovery restored is not a
rate.
Rule 4: `top(n)` ranks by activity inside the window (plus writes since the last sweep, so a
topic written a moment ago ranks), then by bytes, then by name. Its candidates are the
RANK_KEEP topics the last sweep ranked highest and the topics written since (`dirty`, at most
DIRTY_MAX names), so a query costs O(candidates) plus two C-level sums over all topics for the
aggregate of the rest (`Others`), never a Python-level pass over every topic.
Rule 5: a rate is records/s averaged over the latest slots covering about RATE_WINDOW_S.
Rule 6: pure except `run`, the trio task that sweeps on a timer (started by the HTTP front).
A sweep visits every topic (an idle topic costs one dict lookup and two comparisons) in
chunks of SWEEP_CHUNK with a checkpoint between them, so it never holds the loop for long.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine
    from topicsrv.engine.log.topic import Topic

KEY = "activity"
SLOTS = 60
MAX_RINGS = 10_000
RATE_WINDOW_S = 10.0  # a rate is the mean over the latest slots covering about this long
RANK_KEEP = 1000  # topics ranked by a sweep: the candidates of `top` (with the dirty ones)
DIRTY_MAX = 10_000
SWEEP_CHUNK = 5000
U32 = (1 << 32) - 1
_COUNT, _BYTES = attrgetter("count"), attrgetter("bytes")


class Track:
    """One topic's sampler state (Rule 2)."""

    __slots__ = ("prev_w", "prev_r", "last_w", "last_r", "ring_w", "ring_r", "sum_w", "sum_r")

    def __init__(self, prev_w: int, prev_r: int) -> None:
        self.prev_w, self.prev_r = prev_w, prev_r
        self.last_w = self.last_r = 0  # the last slot's counts
        self.ring_w: array[int] | None = None
        self.ring_r: array[int] | None = None
        self.sum_w = self.sum_r = 0  # over the ring (the window)


def all_topics(engine: Engine) -> list[Topic]:
    """Every topic, in no particular order: the plain dict view of the SortedDict iterates
    in C, several times faster than its sorted view."""
    return list(dict.values(engine.topics))


def reads_of(topic: Topic) -> int:
    n: int = topic.read_total
    if topic.type == "queue":
        qs = topic.ext.get("queue")
        if qs is not None:
            n += int(qs.stats.get("claimed", 0))
    return n


@dataclass(frozen=True, slots=True)
class Rates:
    """A topic's (or the server's) recent activity, for the status page."""

    write_rate: float  # records/s over the latest RATE_WINDOW_S (the last slot without a ring)
    read_rate: float
    writes: list[int]  # per slot, oldest first (empty: no sparkline kept)
    reads: list[int]


@dataclass(frozen=True, slots=True)
class Others:
    """The topics `top` did not list, as one aggregate."""

    topics: int
    count: int
    bytes: int
    write_rate: float
    read_rate: float


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
    ranked: list[Topic] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    _fresh: bool = False  # the sweep in progress: first-seen topics start from their counters
    _active: list[Topic] = field(default_factory=list)
    _tw: int = 0
    _tr: int = 0

    def __post_init__(self) -> None:
        self.total_w = array("Q", bytes(8 * self.slots))
        self.total_r = array("Q", bytes(8 * self.slots))

    def changed(self, name: str) -> None:
        """The engine listener: `name` was written (or created) since the last sweep."""
        if len(self.dirty) < DIRTY_MAX:
            self.dirty.add(name)

    # ---- sampling -------------------------------------------------------------------------

    def sweep(self, engine: Engine, now_s: float, ready: bool = True) -> None:
        """Close one slot at once (tests; `run` does the same in chunks)."""
        topics = all_topics(engine)
        self.begin(now_s, ready)
        self.sample(topics)
        self.end(topics)

    def begin(self, now_s: float, ready: bool = True) -> None:
        self._fresh = self.last_at is None or not ready
        last = self.last_at
        self.last_span_s = self.slot_s if last is None else max(1e-3, now_s - last)
        self.last_at = now_s
        self.pos = (self.pos + 1) % self.slots
        self._active, self._tw, self._tr = [], 0, 0
        self.dirty.clear()

    def sample(self, topics: Iterable[Topic]) -> None:
        pos, fresh, active = self.pos, self._fresh, self._active
        for topic in topics:
            tr: Track | None = topic.ext.get(KEY)
            if tr is None:
                w, r = topic.appended_total, reads_of(topic)
                tr = topic.ext[KEY] = Track(w, r) if fresh else Track(0, 0)
            elif (tr.ring_w is None and not (tr.last_w or tr.last_r)
                  and topic.appended_total == tr.prev_w and topic.read_total == tr.prev_r
                  and topic.type != "queue"):
                continue  # idle (the common case: Rule 6)
            else:
                w, r = topic.appended_total, reads_of(topic)
            dw, dr = max(0, w - tr.prev_w), max(0, r - tr.prev_r)
            tr.prev_w, tr.prev_r = w, r
            tr.last_w, tr.last_r = dw, dr
            self._tw += dw
            self._tr += dr
            if self._ring(tr, pos, min(dw, U32), min(dr, U32)) or dw or dr:
                active.append(topic)

    def _ring(self, tr: Track, pos: int, dw: int, dr: int) -> bool:
        """Store one slot in the ring; True while the ring holds activity."""
        ring_w, ring_r = tr.ring_w, tr.ring_r
        if ring_w is None or ring_r is None:
            if not (dw or dr) or self.rings >= self.max_rings:
                return False
            ring_w = tr.ring_w = array("I", bytes(4 * self.slots))
            ring_r = tr.ring_r = array("I", bytes(4 * self.slots))
            self.rings += 1
        tr.sum_w += dw - ring_w[pos]
        tr.sum_r += dr - ring_r[pos]
        ring_w[pos], ring_r[pos] = dw, dr
        if not (tr.sum_w or tr.sum_r):  # a whole window without activity: free the ring
            tr.ring_w = tr.ring_r = None
            self.rings -= 1
            return False
        return True

    def end(self, topics: list[Topic]) -> None:
        """Rule 4: rank the active topics, then fill up with the biggest ones."""
        self.total_w[self.pos], self.total_r[self.pos] = self._tw, self._tr
        ranked = heapq.nlargest(RANK_KEEP, self._active, key=self._window)
        if len(ranked) < RANK_KEEP:
            chosen = {id(t) for t in ranked}
            ranked += [t for t in heapq.nlargest(RANK_KEEP, topics, key=_BYTES)
                       if id(t) not in chosen][:RANK_KEEP - len(ranked)]
        self.ranked, self._active = ranked, []
        self.sweeps += 1

    async def run(self, engine: Engine, ready: Callable[[], bool] = lambda: True, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        engine.topic_listeners.append(self.changed)  # topics only (engine/core.py Rule 4)
        try:
            self.sweep(engine, trio.current_time(), ready())
            task_status.started()
            while True:
                await trio.sleep(self.slot_s)
                topics = all_topics(engine)
                self.begin(trio.current_time(), ready())
                for i in range(0, len(topics), SWEEP_CHUNK):
                    if i:
                        await trio.lowlevel.checkpoint()
                    self.sample(topics[i:i + SWEEP_CHUNK])
                self.end(topics)
        finally:
            engine.topic_listeners.remove(self.changed)

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

    @staticmethod
    def _window(topic: Topic) -> int:
        tr: Track | None = topic.ext.get(KEY)
        if tr is None:
            return 0
        return tr.sum_w + tr.sum_r if tr.ring_w is not None else tr.last_w + tr.last_r

    def score(self, topic: Topic) -> int:
        """Rule 4's activity: the window's counts plus what happened since the last sweep."""
        tr: Track | None = topic.ext.get(KEY)
        if tr is None:
            return topic.appended_total + reads_of(topic)
        return (self._window(topic) + max(0, topic.appended_total - tr.prev_w)
                + max(0, reads_of(topic) - tr.prev_r))

    def top(self, engine: Engine, n: int) -> tuple[list[Topic], Others]:
        """The `n` most active topics, most active first, and the rest as one aggregate."""
        topics = engine.topics
        if len(topics) <= max(n, RANK_KEEP):
            candidates: list[Topic] = list(topics.values())
        else:
            found = {id(t): t for t in self.ranked if topics.get(t.name) is t}
            for name in self.dirty:
                t = topics.get(name)
                if t is not None:
                    found[id(t)] = t
            candidates = list(found.values())
        best = sorted(candidates, key=lambda t: (-self.score(t), -t.bytes, t.name))[:n]
        if len(best) == len(topics):
            return best, Others(0, 0, 0, 0.0, 0.0)
        everything = dict.values(topics)  # C-level iteration (order does not matter)
        shown = [self.rates(t) for t in best]
        server = self.server_rates()
        return best, Others(
            topics=len(topics) - len(best),
            count=sum(map(_COUNT, everything)) - sum(map(_COUNT, best)),
            bytes=sum(map(_BYTES, everything)) - sum(map(_BYTES, best)),
            write_rate=max(0.0, server.write_rate - sum(r.write_rate for r in shown)),
            read_rate=max(0.0, server.read_rate - sum(r.read_rate for r in shown)))
