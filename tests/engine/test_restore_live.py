"""restore.put_live (a replica's APPEND frame in one batch) leaves a topic exactly as
restore.put_slot record by record does: slots, counts, tag index, IDs, ts clamping."""

from __future__ import annotations

import random
from typing import Any

from topicsrv.engine import restore
from topicsrv.engine.config import TopicConfig
from topicsrv.engine.log.segments import SEGMENT_RECORDS, Segment
from topicsrv.engine.log.topic import Topic

Item = tuple[bytes, int, "str | None", "str | None"]


def _state(t: Topic) -> dict[str, Any]:
    segs = []
    for seg in t.segs:
        if isinstance(seg, Segment):
            segs.append(("seg", seg.base, list(seg.blobs), list(seg.ts), list(seg.sizes),
                         bytes(seg.flags), seg.nodes, seg.tags, seg.kinds, seg.live,
                         seg.live_bytes, None if seg.xids is None else list(seg.xids),
                         seg.ids_exact, seg.sealed))
        else:
            segs.append(("run", seg.base, seg.end, seg.flag, seg.ts, seg.xids))
    return {
        "segs": segs, "count": t.count, "bytes": t.bytes, "next_seq": t.next_seq,
        "last_ts": t.last_ts, "last_id": t.last_id, "xid_since": t.xid_since,
        "tags": {k: list(v) for k, v in t.tags._by_tag.items()},
    }


def _frames(rng: random.Random, mapped: bool) -> list[tuple[int, int, list[Item], Any]]:
    out: list[tuple[int, int, list[Item], Any]] = []
    seq, ts, ms = 1, 1000, 1
    for _ in range(40):
        n = rng.choice((1, 2, 16, 300, SEGMENT_RECORDS + 5))
        if rng.random() < 0.1:
            seq += rng.randint(1, 50)  # a gap: LOST slots
        first = seq
        if rng.random() < 0.1 and first > 3:
            first -= rng.randint(1, 3)  # overlaps what the topic holds
        ts = ts + rng.randint(0, 5) if rng.random() < 0.8 else ts - rng.randint(1, 5)  # clamped
        items: list[Item] = []
        for i in range(n):
            blob = (b"[" if rng.random() < 0.5 else b"{") + b"x" * rng.randint(0, 5)
            node = rng.choice((None, None, "n1", "n2")) if rng.random() < 0.3 else None
            tag = rng.choice((None, "a", "b")) if rng.random() < 0.3 else None
            items.append((blob, 10 + i % 7, node, tag))
        xids = None
        if mapped and rng.random() < 0.9:
            xids = []
            for _ in range(n):
                ms += rng.randint(0, 1)
                xids.append((ms, rng.randint(0, 3)))
        out.append((first, ts, items, xids))
        seq = max(seq, first + n)
    return out


def test_put_live_matches_put_slot_record_by_record() -> None:
    for case in range(12):
        rng = random.Random(case)
        mapped = case % 2 == 1
        a = Topic("t", 1, "log", TopicConfig(), 1, 0)
        b = Topic("t", 1, "log", TopicConfig(), 1, 0)
        for first, ts, items, xids in _frames(rng, mapped):
            if first + len(items) <= a.next_seq:
                continue  # replapply's Rule 2 skips it before either call
            for i, (blob, size, node, tag) in enumerate(items):
                restore.put_slot(a, first + i, ts, blob, size, node, tag,
                                 xid=None if xids is None else xids[i])
            restore.put_live(b, first, ts, items, xids)
            assert _state(a) == _state(b), (case, first)
