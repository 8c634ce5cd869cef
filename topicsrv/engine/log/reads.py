"""The read pipeline (seeds 7.3): one implementation for diff, SSE, XREAD and XREADGROUP.

Per candidate seq from the cursor, in order:
  1. live-floor gate: `from_seq + 1 < evict_floor` emits the tombstone (seeds 5.4); a cursor in
     a purely deleted gap moves to earliest_seq - 1 silently. A cursor beyond head_seq (or from
     another topic instance) gets the `recreated` tombstone (seeds 5.5).
  2. TTL: `Topic.expire(now)` runs first, so expired records are already behind the gate.
  3. deleted slots are skipped silently.
  4. the node filter drops the reader's own records silently.
  5. the survivors are delivered, up to `limit` examined slots and `max_bytes`.
Every skipped seq advances next_from_seq (ordering-and-cursors): `caught_up` means
`next_from_seq == head_seq`, never "the batch was short".

Rule: a cursor below `seq_base - 1` reads as `seq_base - 1`: no seq below seq_base ever
existed, so nothing there was lost (a fresh topic with seq_base 100 read from 0 gets no
tombstone; one that lost records reports a gap starting at seq_base).
Rule: at most one tombstone per response. Slots LOST in the middle of the log (an acked tail
lost in a crash) are reported like a front gap, reason "lost"; TRIMMED slots (a router's dest:
source records evicted before they were forwarded) likewise, reason "source_trim". A response
that already carries records or a tombstone stops in front of them so the next read reports
them first; a cursor in a dead gap that holds such slots is never moved past them silently.
The tombstone is a `Tombstone` value (engine/log/tombstone.py); the fronts only render it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

from topicsrv.engine.log import failover, xids
from topicsrv.engine.log.blobs import Blobs
from topicsrv.engine.log.columns import Packed
from topicsrv.engine.log.records import KIND_FIELDS, KIND_JSON, blob_to_json, blob_to_resp
from topicsrv.engine.log.segments import GAP_FLAGS, LIVE, LOST
from topicsrv.engine.log.tombstone import Tombstone
from topicsrv.engine.log.topic import Topic

FMT_JSON: Final = KIND_JSON
FMT_RESP: Final = KIND_FIELDS


@dataclass(slots=True)
class ReadResult:
    records: Sequence[bytes]  # blobs in the requested format: a list, or a Blobs (engine/log/blobs.py)
    seqs: list[int]  # seq of each record, same order
    tombstone: Tombstone | None
    next_from_seq: int
    head_seq: int
    earliest_seq: int
    scanned: int

    @property
    def caught_up(self) -> bool:
        return self.next_from_seq == self.head_seq

    @property
    def lag(self) -> int:
        return max(0, self.head_seq - self.next_from_seq)


def _converter(fmt: int) -> Callable[[bytes, str | None, str | None], bytes]:
    if fmt == FMT_JSON:
        return blob_to_json
    return lambda blob, node, tag: blob_to_resp(blob)


def tombstone(
    topic: Topic, gap_from: int, gap_to: int, reason: str, missed: int, earliest: int
) -> Tombstone:
    """The tombstone of a gap; `earliest` is the first live seq after it (Tombstone Rule 4)."""
    if earliest <= topic.head_seq and topic.segs and earliest >= topic.segs[0].base:
        ts = topic.ts_of(earliest)
    else:
        ts = topic.last_ts
    xid = None if topic.xid_since is None else xids.tombstone_xid(topic, earliest)
    return Tombstone(gap_from, gap_to, reason, missed, earliest, topic.head_seq, ts, xid)


def gate(topic: Topic, from_seq: int, epoch: int | None = None) -> tuple[int, Tombstone | None]:
    """Step 1: (cursor to scan after, tombstone or None). Call after topic.expire(now)."""
    from_seq = max(from_seq, topic.seq_base - 1)  # no seq below seq_base ever existed
    head = topic.head_seq
    earliest = topic.earliest_seq
    if from_seq > head or (epoch is not None and epoch != topic.epoch):
        tomb = tombstone(topic, topic.seq_base, head, "recreated", 0, earliest)
        return earliest - 1, tomb
    if from_seq + 1 < topic.evict_floor:
        gap_from, gap_to = from_seq + 1, earliest - 1
        tomb = tombstone(
            topic, gap_from, gap_to, topic.loss_reason(gap_from),
            topic.missed_estimate(gap_from, gap_to), earliest,
        )
        return earliest - 1, tomb
    if from_seq + 1 < earliest:
        if _gap_below(topic, from_seq + 1, earliest):  # told by the scan, never skipped
            return max(from_seq, topic.front - 1), None
        return earliest - 1, None
    return from_seq, None


def _gap_below(topic: Topic, lo: int, hi: int) -> bool:
    """True if a LOST or TRIMMED slot lies in [max(lo, front), hi)."""
    s = max(lo, topic.front)
    while s < hi:
        seg, i = topic.locate(s)
        j = min(hi, seg.next_seq) - seg.base
        if any(seg.flags.find(flag, i, j) >= 0 for flag in GAP_FLAGS):
            return True
        s = seg.base + j
    return False


def read(
    topic: Topic,
    from_seq: int,
    limit: int,
    now: int,
    *,
    fmt: int = FMT_JSON,
    max_bytes: int = 0,
    nodes: Collection[str] | None = None,
    epoch: int | None = None,
) -> ReadResult:
    topic.expire(now)
    from_seq = max(from_seq, topic.seq_base - 1)  # seeds 4.1: a topic's seqs start at seq_base
    cursor, tomb = gate(topic, from_seq, epoch)
    head = topic.head_seq
    records: list[bytes] = []  # blobs, and packed runs as one slice each (`runs`: blobs Rule 2)
    runs: dict[int, tuple[Packed, int, int]] | None = None
    seqs: list[int] = []
    nodeset = nodes if nodes and topic.config.dedupe_node else None
    convert = _converter(fmt)
    scanned = nbytes = 0
    s = cursor + 1
    window = limit
    while window > 0 and s <= head:
        seg, i = topic.locate(s)
        n = min(len(seg), head + 1 - seg.base)  # never past the visible head (Topic Rule 6)
        j = seg.next_visible(i)
        if j >= n:  # the rest of this segment (up to the head) is deleted
            s = seg.base + n
            continue
        gap = seg.flags[j]
        if gap in GAP_FLAGS:
            if seqs or tomb is not None:
                s = seg.base + j
                break
            end = seg.base + j
            while end <= head:  # a run of LOST (TRIMMED) slots may span segments (and Runs)
                seg2, k = topic.locate(end)
                stop = seg2.lost_end(k, gap)
                end = seg2.base + stop
                if stop < len(seg2):
                    break
            end = min(end, head + 1)
            reason = failover.reason_at(topic, seg.base + j) if gap == LOST else "source_trim"
            tomb = tombstone(topic, from_seq + 1, end - 1, reason, end - (seg.base + j), end)
            s = end
            continue
        topic.touch(seg)  # a bare segment is made whole before it is read (Topic Rule 8)
        # A run of slots [j, k) that can go out as one slice: all live, no filter. Under a byte
        # cap only a run already in the wanted form, cut where the cap is reached (running
        # totals and a bisect, so a capped read stays linear).
        k = min(n, j + window)
        if (
            nodeset is None or seg.nodes is None
        ) and (not max_bytes or seg.kinds == fmt) and seg.flags.count(LIVE, j, k) == k - j:
            blobs = seg.blobs
            capped = False
            if isinstance(blobs, Packed) and seg.kinds == fmt:  # one slice (columns Rule 1)
                if max_bytes:
                    fit, size = blobs.fit(j, k, max_bytes - nbytes)
                    if fit == 0 and not seqs:
                        fit, size = 1, blobs.fit(j, j + 1, blobs.size(j))[1]  # at least one record
                    if fit < k - j:
                        k, capped = j + fit, True
                    nbytes += size
                if k > j:
                    if runs is None:
                        runs = {}
                    runs[len(records)] = (blobs, j, k)
                    records.append(blobs.joined(j, k))
            else:
                run = blobs[j:k]
                if max_bytes:
                    ends = list(accumulate(map(len, run), initial=nbytes))
                    fit = bisect_right(ends, max_bytes, 1) - 1
                    if fit == 0 and not seqs:
                        fit = 1  # a response always carries at least one record
                    if fit < k - j:
                        run, k, capped = run[:fit], j + fit, True
                    nbytes = ends[fit]
                elif seg.kinds != fmt:  # a segment holding another record form: convert those
                    run = [b if b[0] == fmt else convert(b, seg.node(x), seg.tag(x))
                           for x, b in enumerate(run, j)]
                records.extend(run)  # type: ignore[arg-type]  # all live: no None
            seqs.extend(range(seg.base + j, seg.base + k))
            scanned += k - j
            window -= k - j
            s = seg.base + k
            if capped:
                break
            continue
        # One slot at a time: filters or a byte budget apply.
        flag = seg.flags[j]
        if flag != LIVE:
            s = seg.base + j + 1
            continue
        if nodeset is not None and seg.nodes is not None and seg.nodes[j] in nodeset:
            scanned += 1
            window -= 1
            s = seg.base + j + 1
            continue
        blob = seg.blobs[j]
        assert blob is not None
        if blob[0] != fmt:
            blob = convert(blob, seg.node(j), seg.tag(j))
        if max_bytes and seqs and nbytes + len(blob) > max_bytes:
            s = seg.base + j
            break
        nbytes += len(blob)
        records.append(blob)
        seqs.append(seg.base + j)
        scanned += 1
        window -= 1
        s = seg.base + j + 1
    # Step past deleted slots right behind the window, so a reader is not left one empty
    # round-trip short of caught_up; LOST slots are never stepped over silently.
    while s <= head:
        seg, i = topic.locate(s)
        j = seg.next_visible(i)
        if j < len(seg):
            s = seg.base + j
            break
        s = seg.next_seq
    next_from_seq = head if s > head else s - 1
    out: Sequence[bytes] = records
    if runs is not None:
        out = Blobs(b"," if fmt == FMT_JSON else b"", records, runs, len(seqs))
    if fmt == FMT_RESP and topic.xid_since is not None and seqs:
        out = xids.reid_all(topic, seqs, out)
    topic.last_read_ts = now
    topic.last_consumed_at = now
    topic.read_total += len(seqs)
    return ReadResult(out, seqs, tomb, next_from_seq, head, topic.earliest_seq, scanned)


def scan_range(
    topic: Topic, lo: int, hi: int, count: int, now: int, *, reverse: bool = False, fmt: int = FMT_RESP
) -> list[tuple[int, bytes]]:
    """Live records with lo <= seq <= hi, at most `count` (0 = all); no tombstones (XRANGE)."""
    seqs, blobs = scan_blobs(topic, lo, hi, count, now, reverse=reverse, fmt=fmt)
    return list(zip(seqs, blobs, strict=True))


def scan_blobs(
    topic: Topic, lo: int, hi: int, count: int, now: int, *, reverse: bool = False, fmt: int = FMT_RESP
) -> tuple[list[int], Sequence[bytes]]:
    """`scan_range` as (seqs, blobs), a run of packed slots kept as one slice (blobs Rule 2)."""
    seqs: list[int] = []
    records: list[bytes] = []
    runs: dict[int, tuple[Packed, int, int]] = {}
    _scan_range(topic, lo, hi, count, now, reverse, fmt, seqs, records, runs)
    out: Sequence[bytes] = records
    if runs:
        out = Blobs(b"," if fmt == FMT_JSON else b"", records, runs, len(seqs))
    if fmt == FMT_RESP and topic.xid_since is not None and seqs:
        since = topic.xid_since
        return seqs, [b if s < since else xids.reid(b, xids.xid_of(topic, s))
                      for s, b in zip(seqs, out, strict=True)]
    return seqs, out


def _scan_range(
    topic: Topic, lo: int, hi: int, count: int, now: int, reverse: bool, fmt: int,
    seqs: list[int], out: list[bytes], runs: dict[int, tuple[Packed, int, int]],
) -> None:
    """Fill `seqs` and `out` (a packed run as one slice, noted in `runs`)."""
    topic.expire(now)
    lo = max(lo, topic.front)
    hi = min(hi, topic.head_seq)
    if lo > hi or not topic.segs:
        return
    convert = _converter(fmt)
    seq = hi if reverse else lo
    while lo <= seq <= hi:
        seg, i = topic.locate(seq)
        if reverse:
            stop = max(lo - seg.base, 0)
            idx = range(i, stop - 1, -1)
        else:
            stop = min(hi - seg.base + 1, len(seg))
            idx = range(i, stop)
        if not seg.live:  # nothing to deliver here (a Run may span any number of seqs)
            seq = seg.base - 1 if reverse else seg.base + len(seg)
            continue
        topic.touch(seg)  # a bare segment is made whole before it is read (Topic Rule 8)
        flags, blobs = seg.flags, seg.blobs
        if not reverse and seg.kinds == fmt:
            # Fast path: a run of live slots in this record form goes out as one slice.
            j = stop if not count else min(stop, i + count - len(seqs))
            if flags.count(LIVE, i, j) == j - i:
                seqs.extend(range(seg.base + i, seg.base + j))
                if isinstance(blobs, Packed):
                    if j > i:
                        runs[len(out)] = (blobs, i, j)
                        out.append(blobs.joined(i, j))
                else:
                    out.extend(blobs[i:j])  # type: ignore[arg-type]
                if count and len(seqs) >= count:
                    return
                if j < stop:
                    seq = seg.base + j
                    continue
                seq = seg.base + len(seg)
                continue
        for x in idx:
            if flags[x] == LIVE:
                blob = blobs[x]
                assert blob is not None
                if blob[0] != fmt:
                    blob = convert(blob, seg.node(x), seg.tag(x))
                seqs.append(seg.base + x)
                out.append(blob)
                if count and len(seqs) >= count:
                    return
        seq = seg.base - 1 if reverse else seg.base + len(seg)
