"""Rebuilding topics from storage (recovery) and marking a failed tail: the engine side.

Storage reads frames; this module turns them into a Topic without going through the write
path (no re-encode, no new seqs, no journal calls).

Rule 1: slots are restored in seq order; a seq above `next_seq` fills the gap with LOST
slots (seqs that were handed out and then lost), so seqs are never reused.
Rule 2: slots below the restored `front` are EVICTED; DELETED slots keep no payload.
Rule 3: `finish` re-derives counts, the tag index and whole-segment reclaim, exactly as a
live topic would have them.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from topicsrv.engine.config import TopicConfig
from topicsrv.engine.log import failover
from topicsrv.engine.log import xids as xmod
from topicsrv.engine.log.segments import (
    DELETED,
    EVICTED,
    LIVE,
    LOST,
    MIXED,
    SEGMENT_RECORDS,
    TRIMMED,
    Run,
    Segment,
)
from topicsrv.engine.log.topic import Topic

if TYPE_CHECKING:
    from topicsrv.engine.core import Engine

_CONFIG_FIELDS = {f.name for f in dataclasses.fields(TopicConfig) if f.init}  # not `durability`


def config_to_dict(config: TopicConfig) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(config).items() if k in _CONFIG_FIELDS}


def config_from_dict(data: dict[str, Any]) -> TopicConfig:
    return TopicConfig(**{k: v for k, v in data.items() if k in _CONFIG_FIELDS})


def new_topic(
    name: str, epoch: int, topic_type: str, config: TopicConfig, seq_base: int, created_ts: int,
    start: int | None = None, front: int = 0,
) -> Topic:
    """An empty topic whose log starts at `start` (default seq_base); nothing below is kept.
    Slots restored below `front` (the checkpointed front) come back EVICTED (Rule 2)."""
    topic = Topic(name, epoch, topic_type, config, seq_base, created_ts)
    if start is not None:
        topic.start_at(start)
    if front > topic.front:
        topic.front = front
    return topic


def _segment_for(topic: Topic, seq: int) -> Segment:
    segs = topic.segs
    last = segs[-1] if segs else None
    if isinstance(last, Segment):
        if not last.full:
            return last
        topic.seal(last)
    seg = Segment(seq)
    segs.append(seg)
    return seg


def fill_lost(topic: Topic, upto: int, ts: int, flag: int = LOST) -> None:
    """Empty slots for every seq in [next_seq, upto): LOST (a reader crossing them gets a
    `lost` tombstone) or DELETED (seqs no reader can have seen: skipped silently). Past the
    current segment, one `Run` stands for the whole gap, whatever its length (Rule 4)."""
    seq = topic.next_seq
    last = topic.segs[-1] if topic.segs else None
    tail = last.end if isinstance(last, Segment) and not last.full else seq
    if upto - tail > SEGMENT_RECORDS:
        if tail > seq:
            fill_lost(topic, tail, ts, flag)  # finish the current segment slot by slot
        last = topic.segs[-1] if topic.segs else None
        if isinstance(last, Segment):
            topic.seal(last)  # full now: nothing is appended to a segment before a Run
        run_flag = EVICTED if tail < topic.front else flag
        run = Run(tail, upto - tail, run_flag, ts)
        xmod.push_dead(topic, run, len(run))
        topic.segs.append(run)
        topic.next_seq = upto
        return
    while seq < upto:
        seg = _segment_for(topic, seq)
        n = min(upto, seg.end) - seq
        seg.append_lost(n, ts)
        xmod.push_dead(topic, seg, n)
        if seq < topic.front:  # never happens for a well-formed image; keep flags honest
            seg.flags[len(seg) - n:] = bytes([EVICTED]) * n
        elif flag != LOST:
            seg.flags[len(seg) - n:] = bytes([flag]) * n
        seq += n
    topic.next_seq = max(topic.next_seq, upto)


def put_run(topic: Topic, base: int, n: int, flag: int, ts: int) -> None:
    """Restore seqs [base, base + n) that hold no record, all `flag` (a persisted Run); a
    gap before `base` is LOST (Rule 1)."""
    if base > topic.next_seq:
        fill_lost(topic, base, ts)
    if base + n > topic.next_seq:
        fill_lost(topic, base + n, ts, flag)


def put_slot(
    topic: Topic, seq: int, ts: int, blob: bytes | None, size: int,
    node: str | None, tag: str | None, flag: int = LIVE, xid: tuple[int, int] | None = None,
) -> None:
    """Restore one slot at `seq` (>= next_seq). `flag` is LIVE, DELETED, LOST or TRIMMED;
    `xid` its stream ID when it was written in an ID-mapped topic (engine/log/xids.py)."""
    if seq < topic.next_seq:
        return  # already restored (an idempotent replay)
    if seq > topic.next_seq:
        fill_lost(topic, seq, ts)
    clamped = ts < topic.last_ts
    if clamped:
        ts = topic.last_ts
    seg = _segment_for(topic, seq)
    if seq < topic.front:
        flag = EVICTED
    if flag == LIVE and blob is not None:
        if node is not None:
            node = sys.intern(node)
        seg.append(blob, ts, size, node, tag)
        if clamped:  # the blob's ID keeps the ts it was written with (segments Rule 7)
            seg.ids_exact = False
        topic.count += 1
        topic.bytes += size
        if tag is not None:
            topic.tags.add(tag, seq)
    else:
        seg.append_lost(1, ts)
        seg.flags[-1] = flag if flag in (DELETED, EVICTED, LOST, TRIMMED) else LOST
    if xid is not None:
        xmod.enable(topic, seq)  # a frame written after the switch (the checkpoint predates it)
        topic.last_id = max(topic.last_id, xid)
    since = topic.xid_since
    if since is not None and (seq >= since or seg.xids is not None):
        xmod.push(topic, seg, xid if xid is not None or seq >= since else (ts, seq))
    topic.next_seq = seq + 1
    topic.last_ts = ts


def put_live(
    topic: Topic, first: int, ts: int, items: list[tuple[bytes, int, str | None, str | None]],
    xids: list[tuple[int, int]] | None = None,
) -> None:
    """`put_slot` of LIVE records at seqs first, first + 1, ... that share `ts` (one APPEND
    frame a replica applies), stored as Topic.append stores a write: one Segment.extend per
    segment the run touches. Same slots, counts, tag index, IDs and ts clamping as `put_slot`
    record by record, which it falls back to where a slot would not be a plain LIVE append
    (an overlap with what is held, seqs below `front`, an ID-mapped topic without IDs)."""
    if not items:
        return
    if first > topic.next_seq:
        fill_lost(topic, first, ts)
    since = topic.xid_since
    if (first < topic.next_seq or first < topic.front
            or (since is not None and (xids is None or first < since))):
        for i, (blob, size, node, tag) in enumerate(items):
            put_slot(topic, first + i, ts, blob, size, node, tag, LIVE,
                     None if xids is None else xids[i])
        return
    clamped = ts < topic.last_ts
    if clamped:
        ts = topic.last_ts
    if xids is not None:
        xmod.enable(topic, first)
        top = max(xids)
        if top > topic.last_id:
            topic.last_id = top
    last = topic.segs[-1] if topic.segs else None
    seg = last if isinstance(last, Segment) else None
    tags_index = topic.tags
    intern = sys.intern
    n = len(items)
    seq = first
    i = 0
    count = total = 0
    while i < n:  # one Segment.extend per segment the run touches, as Topic.append
        seg = topic.tail_for(seg, seq)
        j = min(n, i + seg.end - seq)
        chunk: list[bytes] = []
        sizes: list[int] = []
        nodes: list[str | None] = []
        tags: list[str | None] = []
        kind = items[i][0][0]
        part = 0
        labelled = tagged = False
        for blob, size, node, tag in items[i:j]:
            if blob[0] != kind:
                kind = MIXED
            chunk.append(blob)
            sizes.append(size)
            part += size
            if node is not None:
                node = intern(node)
                labelled = True
            nodes.append(node)
            if tag is not None:
                tags_index.add(tag, seq)
                tagged = True
            tags.append(tag)
            seq += 1
        seg.extend(chunk, ts, sizes, part, kind, nodes if labelled else None,
                   tags if tagged else None)
        if clamped:  # the blobs' IDs keep the ts they were written with (segments Rule 7)
            seg.ids_exact = False
        if xids is not None:
            xmod.push_many(seg, xids[i:j])
        count += j - i
        total += part
        i = j
    topic.count += count
    topic.bytes += total
    topic.next_seq = seq
    topic.last_ts = ts


def finish(
    topic: Topic, *, next_seq: int, front: int, floors: dict[str, int], delete_below: int,
    last_ts: int, now: int, gap_flag: int = LOST, lost_total: int = 0,
) -> None:
    """Set the watermarks after every slot is in; seqs in [restored head, next_seq) get
    `gap_flag`: LOST, or DELETED for an fsync-class topic, whose readers only ever saw
    durable seqs (Topic Rule 6), so nothing above the restored head was seen or acked."""
    if next_seq > topic.next_seq:
        fill_lost(topic, next_seq, max(topic.last_ts, last_ts), gap_flag)
    topic.restore_watermarks(front=front, floors=floors, delete_below=delete_below, last_ts=last_ts,
                             lost_total=lost_total)
    topic.expire(now)
    cfg = topic.config
    if cfg.discard == "old" and (cfg.cap_records or cfg.cap_bytes):
        topic.evict_for_cap(cfg.cap_records, cfg.cap_bytes)
    topic.reclaim()


def mark_silent(topic: Topic, first: int, count: int, ts: int) -> None:
    """Seqs [first, first+count) were assigned but never readable nor acknowledged (an
    fsync-class batch that could not be made durable): DELETED slots, skipped silently."""
    end = first + count
    if topic.next_seq < first:
        fill_lost(topic, first, ts)  # unknown seqs below the range stay conservative
    mark_lost(topic, first, count, DELETED)
    s = max(first, topic.front)
    while s < min(end, topic.next_seq):
        seg, i = topic.locate(s)
        j = min(end, seg.next_seq) - seg.base
        if isinstance(seg, Run):
            if seg.flag == LOST:
                at = topic.seg_index(s)
                topic.segs[at:at + 1] = seg.split(i, j, DELETED)
        else:
            for k in range(i, j):
                if seg.flags[k] == LOST:
                    seg.flags[k] = DELETED
        s = seg.base + j
    if topic.next_seq < end:
        fill_lost(topic, end, ts, DELETED)


def mark_lost(topic: Topic, first: int, count: int, flag: int = LOST) -> int:
    """Flip LIVE slots of [first, first+count) to LOST (a tail that could not be made
    durable; readers crossing them get a `lost` tombstone), or to `flag`. Returns how many
    flipped."""
    lo = max(first, topic.front)
    hi = min(first + count, topic.next_seq)
    flipped = 0
    s = lo
    while s < hi:
        seg, i = topic.locate(s)
        j = min(hi, seg.next_seq) - seg.base
        for k in range(i, j) if seg.live else ():
            if seg.flags[k] == LIVE:
                tag = seg.tag(k)
                if tag is not None:
                    topic.tags.discard(tag, seg.base + k)
                flipped += topic.kill_slots(seg, k, k + 1, flag)
        s = seg.base + j
    return flipped


def drop_segment(topic: Topic, base: int) -> None:
    """The segment starting at `base` was dropped whole (every slot dead): its slots are
    DELETED, whatever they held when the image was taken."""
    if topic.segs and topic.segs[0].base <= base < topic.next_seq:
        seg, _ = topic.locate(base)
        topic.kill_slots(seg, 0, len(seg), DELETED)


def install(engine: Engine, topic: Topic) -> None:
    engine.topics[topic.name] = topic
    engine.epochs[topic.name] = max(engine.epochs.get(topic.name, 0), topic.epoch)


def open_failover_gap(topic: Topic, first: int, count: int) -> None:
    """Seqs [first, first + count) are LOST and remembered as a failover gap
    (engine/log/failover.py Rule 1); idempotent."""
    if count <= 0:
        return
    if topic.next_seq < first + count:
        fill_lost(topic, first + count, topic.last_ts)
    gaps: list[list[int]] = topic.ext.setdefault(failover.KEY, [])
    if [first, first + count - 1] not in gaps:
        gaps.append([first, first + count - 1])
