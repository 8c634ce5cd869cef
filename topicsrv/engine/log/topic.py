"""A topic: its records, watermarks and the involuntary-loss bookkeeping behind tombstones.

Invariants (seeds section 5):
Rule 1: seqs are assigned gap-free at append: `next_seq` only ever grows by the batch size.
Rule 2: `front` is the first seq not lost involuntarily (cap/TTL). Seqs below it are gone.
  `earliest_seq` is the first LIVE seq at/after `front` (head_seq + 1 when there is none).
Rule 3: `evict_floor = max(cap_floor, ttl_floor) + 1`, where each sub-floor is the highest LIVE
  seq that cause removed. Deleted slots never move it, so evict_floor <= earliest_seq.
Rule 4: `$ts` is clamped non-decreasing in seq, so the TTL front is a binary search.
Rule 5: every public operation first calls `expire(now)`, so no caller ever observes a record
  that is logically expired.
Rule 6: `head_seq` is the *visible* head. Storage may hide seqs >= `visible_next` (an
  fsync-class write waiting for its fdatasync) and `reveal` them once durable, so readers see
  records in durable commit order and never one a crash could take back. `next_seq` is the
  assignment counter and may run ahead of `head_seq + 1` meanwhile.
Rule 7: no seq exceeds SEQ_MAX (2^63 - 2, so `next_seq` still fits a signed 64-bit RESP
  integer, issue 23): a write that would pass it is refused whole (`seq_exhausted`) before
  any seq is assigned.
Rule 8: which sealed segments are bare (segments Rule 7): all but the newest sealed one and
  the RECENT_SEGMENTS the topic's readers touched last. `seal` strips the one sealed before; a
  reader calls `touch` before reading a segment, which makes it whole (~2 ms, once) and may
  strip the one it displaces. So readers of recent or repeatedly read records never rebuild
  an ID, and a topic never holds more than whole blobs would take. A queue keeps every
  segment whole: each job is read once, by its claim, so a bare segment would only add a
  rebuild (~0.5 us) to every claim.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

from topicsrv.engine.config import SEQ_MAX, TopicConfig
from topicsrv.engine.log import xids as xmod
from topicsrv.engine.log.idempotency import Table
from topicsrv.engine.log.records import PreparedRecord, too_large
from topicsrv.engine.log.segments import (
    EVICTED,
    LIVE,
    MIXED,
    SEGMENT_RECORDS,
    TRIMMED,
    AnySegment,
    Segment,
)
from topicsrv.engine.log.tagindex import TagIndex
from topicsrv.errors import TopicsError

_LOSS_LOG_MAX: Final = 4096
RECENT_SEGMENTS: Final = 4  # Rule 8
_BASE: Final = attrgetter("base")


class Topic:
    def __init__(
        self, name: str, epoch: int, topic_type: str, config: TopicConfig, seq_base: int, now: int
    ) -> None:
        self.name = name
        self.epoch = epoch
        self.type = topic_type
        self.config = config
        self.seq_base = seq_base
        self.created_ts = now
        self.segs: list[AnySegment] = []  # contiguous: segs[i].next_seq == segs[i + 1].base
        self.next_seq = seq_base
        self.visible_next: int | None = None  # Rule 6: seqs >= this are not readable yet
        self.front = seq_base
        self._earliest = seq_base
        self.floors: dict[str, int] = {"cap": 0, "ttl": 0}
        self.count = 0
        self.bytes = 0
        self.delete_below = 0
        self.last_ts = 0
        self.last_write_ts: int | None = None
        self.last_read_ts: int | None = None
        self.last_consumed_at: int | None = None
        self.tags = TagIndex()
        # (highest seq of an eviction, cumulative live records lost): approximate missed counts
        self._loss_seq = array("Q")
        self._loss_cum = array("Q")
        self.lost_total = 0
        self.idempotency = Table()  # HTTP idempotency keys and XADD IDMP (engine/log/idempotency.py)
        self.appended_total = 0
        self.read_total = 0  # records delivered by reads (topicsrv/activity.py samples it)
        self.deleted_total = 0
        # Client-chosen IDs (engine/log/xids.py): the first seq of the ID-mapped era (None: the
        # topic never took one, its IDs are `<ts>-<seq>`) and Redis's last_id since then.
        self.xid_since: int | None = None
        self.last_id: tuple[int, int] = (0, 0)
        # Extension state owned by other layers (consumer groups, queues); opaque here.
        self.ext: dict[str, Any] = {}
        # Called as (topic, front, new_front) before an eviction (engine/routing/routerfwd.py counts
        # the seqs its routers had not forwarded); None for a topic without outbound routers.
        self.drop_hook: Callable[[Topic, int, int], None] | None = None
        # Rule 8: the sealed segments kept whole for their readers, the one read last first.
        self.recent: list[Segment] = []
        self.newest_sealed: Segment | None = None

    # ---- watermarks -------------------------------------------------------------------

    @property
    def head_seq(self) -> int:
        visible = self.visible_next
        return (self.next_seq if visible is None else visible) - 1

    def hide_from(self, seq: int) -> None:
        """Keep seqs >= `seq` from readers until `reveal` (Rule 6)."""
        if self.visible_next is None:
            self.visible_next = seq

    def reveal(self, upto: int) -> bool:
        """Make every seq < `upto` readable; True if the visible head moved."""
        visible = self.visible_next
        if visible is None or upto <= visible:
            return False
        self.visible_next = None if upto >= self.next_seq else upto
        return True

    @property
    def evict_floor(self) -> int:
        floor = max(self.floors.values()) + 1
        return min(max(floor, self.seq_base), self.head_seq + 1)

    @property
    def earliest_seq(self) -> int:
        p = self._earliest if self._earliest > self.front else self.front
        if p < self.next_seq and self.segs:
            seg, i = self.locate(p)
            if seg.flags[i] == LIVE:  # the common case: the cached floor is still live
                return p if self.visible_next is None else min(p, self.visible_next)
        while p < self.next_seq:
            seg, i = self.locate(p)
            j = seg.flags.find(LIVE, i)
            if j >= 0:
                p = seg.base + j
                break
            p = seg.next_seq
        self._earliest = p
        return p if self.visible_next is None else min(p, self.visible_next)

    # ---- restore (storage rebuilds a topic through these, never through its fields) -------

    def start_at(self, seq: int) -> None:
        """An empty topic's log begins at `seq`: nothing below it is kept or reported."""
        if self.segs or seq <= self.next_seq:
            return
        self.next_seq = self.front = self._earliest = seq

    def restore_watermarks(
        self, *, front: int, floors: dict[str, int], delete_below: int, last_ts: int, lost_total: int = 0,
    ) -> None:
        """Raise the watermarks to their persisted values once every slot is in (never lowers
        one; a front above the current one evicts, reason `cap`) and re-derive the cached
        first live seq."""
        if front > self.front:
            self.drop_front(front, "cap")
        for key, value in floors.items():
            self.floors[key] = max(self.floors.get(key, 0), int(value))
        self.delete_below = max(self.delete_below, delete_below)
        self.last_ts = max(self.last_ts, last_ts)
        self.lost_total = max(self.lost_total, lost_total)
        self._earliest = self.front

    def kill_slots(self, seg: AnySegment, i: int, j: int, flag: int) -> int:
        """Turn the LIVE slots [i, j) of `seg` into `flag` (DELETED, EVICTED, LOST) and keep
        `count`/`bytes` true; returns how many records went. Tags are the caller's (each
        caller prunes them its own way)."""
        n, b = seg.kill(i, j, flag)
        self.count -= n
        self.bytes -= b
        return n

    def seg_index(self, seq: int) -> int:
        """Index in `segs` of the segment holding `seq` (in [segs[0].base, next_seq)): by
        arithmetic (segments are aligned), by binary search past a Run (segments Rule 4)."""
        segs = self.segs
        k = seq // SEGMENT_RECORDS - segs[0].base // SEGMENT_RECORDS
        if k < len(segs):
            seg = segs[k]
            if seg.base <= seq < seg.end:
                return k
        return bisect_right(segs, seq, key=_BASE) - 1

    def locate(self, seq: int) -> tuple[AnySegment, int]:
        """The segment holding `seq` and its index there; `seq` must be in [segs[0].base, next_seq)."""
        seg = self.segs[self.seg_index(seq)]
        return seg, seq - seg.base

    def loss_reason(self, gap_from: int) -> str:
        causes = [name for name, floor in self.floors.items() if floor >= gap_from]
        if len(causes) == 1:
            return causes[0]
        return "mixed" if causes else "cap"

    def missed_estimate(self, gap_from: int, gap_to: int) -> int:
        def cum_at(seq: int) -> int:
            k = bisect_right(self._loss_seq, seq)
            return self._loss_cum[k - 1] if k else 0

        est = cum_at(gap_to) - cum_at(gap_from - 1)
        return max(0, min(est, gap_to - gap_from + 1)) if est > 0 else 0

    # ---- involuntary loss -------------------------------------------------------------

    def expire(self, now: int) -> None:
        ttl = self.config.ttl_ms
        if not ttl or self.front >= self.next_seq:
            return
        cutoff = now - ttl  # expired iff now - ts > ttl  <=>  ts < cutoff
        seg, i = self.locate(self.front)
        if seg.ts[i] >= cutoff:
            return
        lo = self.seg_index(self.front)
        hi = len(self.segs) - 1
        while lo < hi:  # last segment whose first ts is < cutoff
            mid = (lo + hi + 1) // 2
            if self.segs[mid].ts[0] < cutoff:
                lo = mid
            else:
                hi = mid - 1
        last = self.segs[lo]
        self.drop_front(last.base + bisect_left(last.ts, cutoff), "ttl")

    def drop_front(self, new_front: int, cause: str) -> int:
        """Remove [front, new_front) involuntarily; returns how many LIVE records went.
        TRIMMED slots that go raise the floor too, so the reader who had not crossed them
        still gets a tombstone (Rule 3 counts them as lost)."""
        new_front = min(new_front, self.next_seq)
        if new_front <= self.front:
            return 0
        if self.drop_hook is not None:  # routers count what they had not forwarded yet
            self.drop_hook(self, self.front, new_front)
        lost = 0
        highest_live = 0
        s = self.front
        while s < new_front:
            seg, i = self.locate(s)
            j = min(new_front, seg.next_seq) - seg.base
            r = max(seg.flags.rfind(LIVE, i, j), seg.flags.rfind(TRIMMED, i, j))
            if r >= 0:
                highest_live = seg.base + r
            lost += self.kill_slots(seg, i, j, EVICTED)
            s = seg.base + j
        self.front = new_front
        if highest_live > self.floors[cause]:
            self.floors[cause] = highest_live
        if lost:
            self.lost_total += lost
            self._loss_seq.append(highest_live)
            self._loss_cum.append(self.lost_total)
            if len(self._loss_seq) > _LOSS_LOG_MAX:
                self._loss_seq = self._loss_seq[1::2]
                self._loss_cum = self._loss_cum[1::2]
        self.reclaim()
        return lost

    def evict_for_cap(self, max_records: int = 0, max_bytes: int = 0) -> int:
        """Evict the oldest live records until within the given caps (0 = no cap)."""
        need_n = self.count - max_records if max_records else 0
        need_b = self.bytes - max_bytes if max_bytes else 0
        if need_n <= 0 and need_b <= 0:
            return 0
        s = self.front
        while (need_n > 0 or need_b > 0) and s < self.next_seq:
            seg, i = self.locate(s)
            n = len(seg)
            live, live_b = seg.live_in(i, n)
            if need_n - live > 0 or need_b - live_b > 0:
                need_n -= live
                need_b -= live_b
                s = seg.base + n
                continue
            flags, sizes = seg.flags, seg.sizes
            for k in range(i, n):
                if flags[k] == LIVE:
                    need_n -= 1
                    need_b -= sizes[k]
                    if need_n <= 0 and need_b <= 0:
                        s = seg.base + k + 1
                        break
            else:
                s = seg.base + n
        return self.drop_front(s, "cap")

    def reclaim(self) -> list[AnySegment]:
        """Pop whole dead segments off the front (segment-granular reclaim); prune their tags."""
        dropped: list[AnySegment] = []
        while self.segs:
            seg = self.segs[0]
            if seg.next_seq <= self.front and seg.full:
                pass
            elif seg.live == 0 and seg.full and not seg.has_gap():
                self.front = max(self.front, seg.next_seq)
            else:
                break
            dropped.append(self.segs.pop(0))
            if seg.tags is not None:
                for tag in set(seg.tags):
                    if tag is not None:
                        self.tags.prune_below(tag, seg.next_seq)
        if not self.segs:
            self.front = max(self.front, self.next_seq)
        return dropped

    # ---- append ------------------------------------------------------------------------

    def check_append(self, records: list[PreparedRecord]) -> None:
        """Reject before any seq is assigned (seeds 5.3): too large for the cap, or full; or
        past the last possible seq (Rule 7)."""
        if self.next_seq + len(records) - 1 > SEQ_MAX:
            raise TopicsError(  # Redis's wording for a stream whose ids ran out
                "seq_exhausted",
                "The stream has exhausted the last possible ID, unable to add more items",
                {"topic": self.name, "head_seq": self.next_seq - 1, "records": len(records),
                 "seq_max": SEQ_MAX},
            )
        cfg = self.config
        if not (cfg.cap_records or cfg.cap_bytes):
            return
        n = len(records)
        size = sum(r.size for r in records)
        # A record that alone exceeds cap_bytes could never be retained, whatever the policy.
        # Under "reject" the same holds for a whole write; under "old" a big batch is a
        # retention window sliding past its own head, which is what "old" means.
        biggest = max(r.size for r in records)
        whole = cfg.discard == "reject" and (
            (cfg.cap_records and n > cfg.cap_records) or (cfg.cap_bytes and size > cfg.cap_bytes)
        )
        if whole or (cfg.cap_bytes and biggest > cfg.cap_bytes):
            raise too_large(
                f"this write ({n} records, {size} bytes) is larger than the topic's whole cap",
                records=n, bytes=size, cap_records=cfg.cap_records, cap_bytes=cfg.cap_bytes,
            )
        if cfg.discard == "reject" and (
            (cfg.cap_records and self.count + n > cfg.cap_records)
            or (cfg.cap_bytes and self.bytes + size > cfg.cap_bytes)
        ):
            raise TopicsError(
                "topic_full",
                f"topic '{self.name}' is full (discard: reject); retry after consumers drain it",
                {
                    "cap_records": cfg.cap_records, "cap_bytes": cfg.cap_bytes,
                    "count": self.count, "bytes": self.bytes,
                    "head_seq": self.head_seq, "earliest_seq": self.earliest_seq,
                },
            )

    def append(
        self, records: list[PreparedRecord], now: int, xids: list[tuple[int, int]] | None = None
    ) -> tuple[int, int, list[bytes]]:
        """Assign seqs and store; returns (first_seq, ts, blobs). Call check_append first;
        `xids` are the records' stream IDs (xids.plan) in an ID-mapped topic."""
        ts = now if now > self.last_ts else self.last_ts
        seq = first = self.next_seq
        if xids is not None:
            xmod.enable(self, first)
        segs = self.segs
        seg = segs[-1] if segs and isinstance(segs[-1], Segment) else None
        blobs: list[bytes] = []
        total = 0
        n = len(records)
        i = 0
        while i < n:  # one chunk per segment the write touches (Segment.extend)
            seg = self.tail_for(seg, seq)
            j = min(n, i + seg.end - seq)
            chunk: list[bytes] = []
            sizes: list[int] = []
            nodes: list[str | None] | None = None
            tags: list[str | None] | None = None
            kind = -1
            part = 0
            for k in range(i, j):
                rec = records[k]
                blob = rec.encode(seq, ts)
                b0 = blob[0]
                kind = b0 if kind == -1 or kind == b0 else MIXED
                chunk.append(blob)
                size = rec.size
                sizes.append(size)
                part += size
                node = rec.node
                if node is not None:
                    if nodes is None:
                        nodes = [None] * (k - i)
                    nodes.append(sys.intern(node))
                elif nodes is not None:
                    nodes.append(None)
                tag = rec.tag
                if tag is not None:
                    if tags is None:
                        tags = [None] * (k - i)
                    tags.append(tag)
                    self.tags.add(tag, seq)
                elif tags is not None:
                    tags.append(None)
                seq += 1
            seg.extend(chunk, ts, sizes, part, kind, nodes, tags)
            if xids is not None:
                xmod.push_many(seg, xids[i:j])
            blobs += chunk
            total += part
            i = j
        self.next_seq = seq
        if xids is not None:
            self.last_id = xids[-1]
        self.count += len(records)
        self.bytes += total
        self.last_ts = ts
        self.last_write_ts = now
        self.appended_total += len(records)
        if self.config.discard == "old" and (self.config.cap_records or self.config.cap_bytes):
            self.evict_for_cap(self.config.cap_records, self.config.cap_bytes)
        return first, ts, blobs

    # ---- sealed segments (Rule 8) ------------------------------------------------------

    def tail_for(self, seg: Segment | None, seq: int) -> Segment:
        """The segment an append at `seq` goes into: `seg` (the tail) while it has room, else a
        new tail; a full `seg` is sealed (segments Rule 5: only the tail takes appends)."""
        if seg is not None and not seg.full:
            return seg
        if seg is not None:
            self.seal(seg)
        seg = Segment(seq)
        self.segs.append(seg)
        return seg

    def seal(self, seg: Segment) -> None:
        """Seal `seg`, the full tail; the segment sealed before it goes bare unless read."""
        seg.seal()
        prev = self.newest_sealed
        self.newest_sealed = seg
        if prev is not None and prev is not seg and prev not in self.recent and self.type != "queue":
            prev.to_bare()

    def touch(self, seg: AnySegment) -> None:
        """A reader is about to read `seg`: make it whole and keep it so while it is read."""
        recent = self.recent
        if (recent and recent[0] is seg) or not isinstance(seg, Segment) or isinstance(seg.blobs, list):
            return  # read last, a Run or the tail: nothing to do
        if seg in recent:
            recent.remove(seg)
        recent.insert(0, seg)
        seg.to_whole()
        if len(recent) > RECENT_SEGMENTS:
            old = recent.pop()
            if old is not self.newest_sealed:
                old.to_bare()

    # ---- lookups ------------------------------------------------------------------------

    def record_at(self, seq: int) -> tuple[bytes, str | None, str | None] | None:
        """(blob, node, tag) of a live seq, or None."""
        if seq < self.front or seq >= self.next_seq or not self.segs:
            return None
        seg, i = self.locate(seq)
        if seg.flags[i] != LIVE:
            return None
        blob = seg.blobs[i]
        assert blob is not None
        return blob, seg.node(i), seg.tag(i)

    def seq_at_ts(self, ts: int) -> int:
        """First seq (live or not) with $ts >= ts, or next_seq when none."""
        if not self.segs:
            return self.next_seq
        lo, hi = 0, len(self.segs) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.segs[mid].ts[0] < ts:
                lo = mid
            else:
                hi = mid - 1
        seg = self.segs[lo]
        seq = seg.base + bisect_left(seg.ts, ts)
        return max(seq, self.front)

    def ts_of(self, seq: int) -> int:
        seg, i = self.locate(seq)
        return int(seg.ts[i])

