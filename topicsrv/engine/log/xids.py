"""Client-chosen stream IDs (issue 15): the ID of each slot of an ID-mapped topic.

A record's stream ID is `<$ts>-<$seq>` (entries.py) until its topic first takes a client-chosen
ID (XADD `<ms>-<n>` / `<ms>-*`, XSETID). From then on the topic is *ID-mapped*:
`Topic.xid_since` is the first seq of that era and every slot from there on carries its own
ID `(ms, n)`, a pair of u64. The seq is still assigned gap-free: cursors, `$seq`, `$ts`,
tombstone seqs and the whole HTTP side do not change; the ID is RESP-only metadata.

Rule 1: the IDs of a topic are non-decreasing in seq and strictly increasing over its records,
  so an ID position is a binary search: over the segments by their first ID, then inside one.
Rule 2: a Segment of an ID-mapped topic holds `xids`, an array('Q') of ms, n pairs parallel
  to its slots (16 bytes a slot); a segment wholly before `xid_since` has none (its IDs are
  `(ts, seq)`, computed), and a topic that never took an explicit ID pays nothing. A Run's
  `xids` is one pair for all its seqs (or None: `(ts, seq)`).
Rule 3: a slot with no ID of its own (LOST, TRIMMED, a recovered gap, a Run) repeats the ID
  of the slot before it ((0, 0) for a topic's first), which keeps Rule 1 (no record has it
  twice: a search for an ID finds the record before its copies). Deleted slots keep theirs.
Rule 4: `Topic.last_id` is Redis's `last_id`, what a new ID must exceed: moved by every
  append and by XSETID (`set_last_id`), which may lower it down to the last live entry; the
  dead slots above the new value are lowered with it, so Rule 1 survives the next XADD.
Rule 5: `*` follows Redis's streamNextID: `(now, 0)` when now > last ms, else the last ID
  plus one (`(ms, n + 1)`, or `(ms + 1, 0)` at n = 2^64 - 1); `<ms>-*` is `(ms, last n + 1)`
  when ms is the last ms, else `(ms, 0)`; the result must exceed `last_id` (Redis 7.0's
  errors, byte for byte, including its size error for a `<ms>-*` whose seq would overflow).
Rule 6: stored blobs keep `<ts>-<seq>` inside (the WAL, segments and the JSON conversion are
  unchanged); `reid` swaps an entry's ID on its way out to a RESP client.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from topicsrv.engine.log.segments import AnySegment, Run, Segment
from topicsrv.errors import TopicsError

if TYPE_CHECKING:
    from topicsrv.engine.log.topic import Topic

U64 = (1 << 64) - 1
Xid = tuple[int, int]
TOO_SMALL = "The ID specified in XADD is equal or smaller than the target stream top item"
ZERO = "The ID specified in XADD must be greater than 0-0"
EXHAUSTED = "The stream has exhausted the last possible ID, unable to add more items"
# Redis 7.0's reply when `<ms>-*` would overflow the seq of the last ID (its errno is not
# EDOM there, so it reports the size error; the compat suite holds us to 7.0's bytes)
SEQ_OVERFLOW = "Elements are too large to be stored"


def _err(message: str) -> TopicsError:
    return TopicsError("invalid_request", message, None)


# ---- one slot --------------------------------------------------------------------------


def seg_xid(seg: AnySegment, i: int) -> Xid:
    """The ID of slot i of `seg` (Rule 2)."""
    xs = seg.xids
    if xs is None:
        return int(seg.ts[i]), seg.base + i
    if isinstance(xs, tuple):
        return xs
    return xs[2 * i], xs[2 * i + 1]


def xid_of(topic: Topic, seq: int) -> Xid:
    """The ID of `seq` (in [segs[0].base, next_seq)); `(ts, seq)` for a topic never mapped."""
    seg, i = topic.locate(seq)
    return seg_xid(seg, i)


def xid_before(topic: Topic, seq: int) -> Xid:
    """The ID of the slot before `seq` (Rule 3), (0, 0) when there is none."""
    segs = topic.segs
    if not segs or seq - 1 < segs[0].base:
        return (0, 0)
    return xid_of(topic, seq - 1)


def push(topic: Topic, seg: Segment, xid: Xid | None) -> None:
    """Record the ID of the slot just appended to `seg` (None: Rule 3). A segment that began
    before the switch gets its array now, its earlier slots at their implicit IDs."""
    i = len(seg) - 1
    xs = seg.xids
    if xs is None:
        xs = seg.xids = array("Q")
        for k in range(i):
            xs.append(int(seg.ts[k]))
            xs.append(seg.base + k)
    if xid is None:
        xid = seg_xid(seg, i - 1) if i else xid_before(topic, seg.base)
    xs.append(xid[0])
    xs.append(xid[1])


def push_many(seg: Segment, new: list[Xid]) -> None:
    """`push` of the IDs of the last len(new) slots of `seg`, appended together."""
    xs = seg.xids
    if xs is None:
        xs = seg.xids = array("Q")
        for k in range(len(seg) - len(new)):
            xs.append(int(seg.ts[k]))
            xs.append(seg.base + k)
    for ms, n in new:
        xs.append(ms)
        xs.append(n)


def push_dead(topic: Topic, seg: AnySegment, count: int) -> None:
    """IDs for `count` slots with no record just added at the end of `seg` (or `seg` is a new
    Run): each repeats the ID before it (Rule 3)."""
    if topic.xid_since is None:
        return
    if isinstance(seg, Run):
        if seg.end > topic.xid_since:  # below the switch it stays implicit
            seg.xids = xid_before(topic, seg.base)
        return
    first = len(seg) - count
    if seg.xids is None and seg.next_seq <= topic.xid_since:
        return  # every slot still below the switch: implicit IDs
    if seg.xids is None:
        xs = seg.xids = array("Q")
        for k in range(first):
            xs.append(int(seg.ts[k]))
            xs.append(seg.base + k)
    prev = seg_xid(seg, first - 1) if first else xid_before(topic, seg.base)
    assert isinstance(seg.xids, array)
    seg.xids.extend(prev * count)


def enable(topic: Topic, at_seq: int) -> None:
    """Make the topic ID-mapped from `at_seq` on (no-op when it already is)."""
    if topic.xid_since is None:
        topic.xid_since = at_seq
        topic.last_id = implicit_last(topic)


def implicit_last(topic: Topic) -> Xid:
    """Redis's last_id of a topic that is not ID-mapped: the ID of its last seq."""
    last = topic.next_seq - 1
    if last < topic.seq_base:
        return (0, 0)
    if topic.segs and last >= topic.segs[0].base:
        return xid_of(topic, last)
    return (topic.last_ts, last)


def last_id(topic: Topic) -> Xid:
    return topic.last_id if topic.xid_since is not None else implicit_last(topic)


# ---- new IDs ----------------------------------------------------------------------------


def _incr(x: Xid) -> Xid | None:
    ms, n = x
    if n < U64:
        return ms, n + 1
    if ms < U64:
        return ms + 1, 0
    return None


def plan(topic: Topic, n: int, spec: tuple[int, int | None] | None, now: int) -> list[Xid] | None:
    """The IDs of `n` records about to be appended (Rule 5), or None for a topic that stays
    on implicit IDs. `spec` is a client's `(ms, n)` or `(ms, None)` for `<ms>-*`; None is
    `*`. Raises with Redis's text; changes nothing."""
    if spec is None and topic.xid_since is None:
        return None
    last = last_id(topic)
    if last == (U64, U64):
        raise _err(EXHAUSTED)
    out: list[Xid] = []
    for k in range(n):
        if k == 0 and spec is not None:
            ms, seq = spec
            if seq is None:
                if ms == last[0]:
                    if last[1] == U64:
                        raise _err(SEQ_OVERFLOW)
                    x = (ms, last[1] + 1)
                else:
                    x = (ms, 0)
            else:
                x = (ms, seq)
            if x <= last:
                raise _err(TOO_SMALL)
        elif now > last[0]:
            x = (now, 0)
        else:
            nxt = _incr(last)
            if nxt is None:
                raise _err(EXHAUSTED)
            x = nxt
        out.append(x)
        last = x
    return out


def set_last_id(topic: Topic, x: Xid) -> None:
    """XSETID (Rule 4): the caller checked `x` >= the last live entry's ID."""
    enable(topic, topic.next_seq)
    topic.last_id = x
    seq = topic.next_seq - 1
    segs = topic.segs
    while segs and seq >= segs[0].base:
        seg, i = topic.locate(seq)
        if seg_xid(seg, i) <= x:
            break
        if isinstance(seg, Run):  # no record in it: one pair for all its seqs
            seg.xids = x
            seq = seg.base - 1
            continue
        if seg.xids is None:  # materialise the array (its implicit IDs stay as they are),
            xs = seg.xids = array("Q")  # even for a segment below the switch
            for k in range(len(seg)):
                xs.append(int(seg.ts[k]))
                xs.append(seg.base + k)
        seg.xids[2 * i] = x[0]
        seg.xids[2 * i + 1] = x[1]
        seq -= 1


# ---- positions ----------------------------------------------------------------------------


def _first_key(seg: AnySegment) -> Xid:
    return seg_xid(seg, 0)


def lower_bound(topic: Topic, x: Xid) -> int:
    """The first seq (resident, < next_seq) whose ID is >= x; next_seq when none (Rule 1)."""
    segs = topic.segs
    if not segs:
        return topic.next_seq
    k = bisect_left(segs, x, key=_first_key)
    if k > 0:
        seg = segs[k - 1]
        j = bisect_left(range(len(seg)), x, key=lambda i: seg_xid(seg, i))
        if j < len(seg):
            return seg.base + j
    return segs[k].base if k < len(segs) else topic.next_seq


def upper_bound(topic: Topic, x: Xid) -> int:
    """The first seq whose ID is > x; next_seq when none."""
    nxt = _incr(x)
    return topic.next_seq if nxt is None else lower_bound(topic, nxt)


def exact(topic: Topic, x: Xid) -> int:
    """The seq of the slot whose ID is x (0: none resident)."""
    s = lower_bound(topic, x)
    if s < topic.next_seq and xid_of(topic, s) == x:
        return s
    return 0


def below_retained(topic: Topic, x: Xid) -> bool:
    """True when x lies before every resident slot while older seqs existed (their IDs are
    gone with their segments)."""
    segs = topic.segs
    return bool(segs) and segs[0].base > topic.seq_base and x < seg_xid(segs[0], 0)


def minus_one(x: Xid) -> Xid:
    ms, n = x
    if n:
        return ms, n - 1
    return (ms - 1, U64) if ms else (0, 0)


def tombstone_xid(topic: Topic, earliest: int) -> Xid:
    """The ID of a tombstone whose reader resumes at `earliest`: that record's ID minus one,
    so reading after it is exact; the last ID when nothing follows the gap."""
    if earliest <= topic.head_seq and topic.segs and earliest >= topic.segs[0].base:
        return minus_one(xid_of(topic, earliest))
    return last_id(topic)


# ---- rendering ------------------------------------------------------------------------------


def reid(blob: bytes, x: Xid) -> bytes:
    """The RESP entry `blob` (`*2\\r\\n$L\\r\\n<id>\\r\\n...`) with its ID replaced by x."""
    end = blob.index(b"\r\n", 5)
    start = end + 2 + int(blob[5:end]) + 2
    ident = b"%d-%d" % x
    return b"*2\r\n$%d\r\n%b\r\n%b" % (len(ident), ident, blob[start:])


def reid_all(topic: Topic, seqs: list[int], blobs: Sequence[bytes]) -> list[bytes]:
    since = topic.xid_since
    assert since is not None
    return [b if s < since else reid(b, xid_of(topic, s)) for s, b in zip(seqs, blobs, strict=True)]
