"""Consumer-group delivery and the PEL: XREADGROUP (`>` and history), XACK, XPENDING.
Pure and synchronous; time is always passed in (`now`, from `engine.now()`).

Rule 1: `>` reads go through `reads.read`, the one read pipeline: a tombstone (cap/TTL loss
  crossing the group cursor) is delivered first, advances the cursor to `gap_to` and never
  enters the PEL; deleted slots and own-node records are skipped silently.
Rule 2: XACK never touches the log; a PEL entry whose record was deleted or evicted is
  reported as Redis does (history: [id, nil]).
"""

from __future__ import annotations

from collections.abc import Collection

from topicsrv.engine.groups.groupstate import (
    Delivery,
    Group,
    entries_added,
    entry_ms,
    estimate_entries_read,
    has_tombstones,
    max_hole,
)
from topicsrv.engine.log import xids
from topicsrv.engine.log.reads import FMT_RESP, ReadResult, read
from topicsrv.engine.log.records import KIND_FIELDS, blob_to_resp
from topicsrv.engine.log.topic import Topic


def _advance(topic: Topic, group: Group, seq: int, ms: int, hole: int | None) -> None:
    """Move last_id to a delivered `seq` and keep entries_read as Redis does."""
    if seq <= group.last_seq:
        return
    if group.entries_read is not None and not has_tombstones(topic, seq, hole):
        group.entries_read += 1
    elif entries_added(topic):
        group.entries_read = estimate_entries_read(topic, seq, hole)
    group.last_seq, group.last_ms = seq, ms


def read_new(
    topic: Topic,
    group: Group,
    consumer: str,
    count: int,
    now: int,
    *,
    noack: bool = False,
    nodes: Collection[str] | None = None,
) -> ReadResult:
    """XREADGROUP `>`: entries after the group cursor (count 0 = all), through the read
    pipeline. Delivered records enter the PEL (unless noack); a tombstone only moves the cursor.
    """
    owner = group.touch(consumer, now)
    head = topic.head_seq
    if group.cursor >= head:
        topic.expire(now)
        topic.last_consumed_at = now  # a caught-up XREADGROUP still consumes (seeds 3.1)
        return ReadResult([], [], None, group.cursor, head, topic.earliest_seq, 0)
    limit = count if count > 0 else max(1, head - group.cursor)
    res = read(topic, group.cursor, limit, now, fmt=FMT_RESP, nodes=nodes)
    hole = max_hole(topic)
    if res.tombstone is not None:
        gap_to = res.tombstone.gap_to
        if gap_to > group.last_seq:
            group.last_seq, group.last_ms = gap_to, res.tombstone.ts
            group.entries_read = estimate_entries_read(topic, gap_to, hole)
    for seq in res.seqs:
        ms = entry_ms(topic, seq)
        _advance(topic, group, seq, ms, hole)
        if not noack:
            d = group.pel.get(seq)
            if d is None:
                d = Delivery(seq, ms, owner.name, now, 1)
            else:
                d.time, d.count = now, 1
            group.assign(d, owner)
    if res.records:
        owner.active_time = now
    group.cursor = max(group.cursor, res.next_from_seq, group.last_seq)
    return res


def resp_entry(topic: Topic, seq: int) -> bytes | None:
    rec = topic.record_at(seq)
    if rec is None:
        return None
    blob = rec[0]
    blob = blob if blob[0] == KIND_FIELDS else blob_to_resp(blob)
    since = topic.xid_since
    if since is not None and seq >= since:  # an ID-mapped topic (engine/log/xids.py Rule 6)
        blob = xids.reid(blob, xids.xid_of(topic, seq))
    return blob


def read_history(
    topic: Topic, group: Group, consumer: str, after_seq: int, count: int, now: int
) -> list[tuple[Delivery, bytes | None]]:
    """XREADGROUP with an id: the consumer's own pending entries with seq > after_seq. A
    deleted entry comes back as (delivery, None) (Redis: [id, nil]) and keeps its counters."""
    topic.expire(now)
    owner = group.touch(consumer, now)
    out: list[tuple[Delivery, bytes | None]] = []
    for seq in owner.pel.irange(minimum=after_seq, inclusive=(False, True)):
        if count and len(out) >= count:
            break
        d: Delivery = owner.pel[seq]
        blob = resp_entry(topic, seq)
        if blob is not None:
            d.time = now
            d.count += 1
        out.append((d, blob))
    return out


def ack(group: Group, seqs: Collection[int]) -> int:
    n = 0
    for seq in seqs:
        d = group.pel.get(seq)
        if d is not None:
            group.drop(d)
            n += 1
    return n


# ---- inspection ------------------------------------------------------------------------------


def pending_summary(group: Group) -> tuple[int, Delivery | None, Delivery | None, list[tuple[str, int]]]:
    """XPENDING summary: (count, first, last, [(consumer, pending)] for consumers with any)."""
    if not group.pel:
        return 0, None, None, []
    first = group.pel.peekitem(0)[1]
    last = group.pel.peekitem(-1)[1]
    per = [(c.name, len(c.pel)) for c in group.consumers.values() if c.pel]
    return len(group.pel), first, last, per


def pending_range(
    group: Group, lo: int, hi: int, count: int, now: int, consumer: str | None = None, min_idle: int = 0
) -> list[Delivery]:
    """XPENDING extended: PEL entries with lo <= seq <= hi, idle >= min_idle, at most count."""
    if count <= 0:
        return []
    if consumer is not None:
        c = group.consumer(consumer)
        if c is None:
            return []
        pel = c.pel
    else:
        pel = group.pel
    out: list[Delivery] = []
    for seq in pel.irange(lo, hi):
        d: Delivery = pel[seq]
        if min_idle and d.idle(now) < min_idle:
            continue
        out.append(d)
        if len(out) >= count:
            break
    return out
