"""Stream IDs <-> seq positions (API.md section 9 "Stream IDs").

A record's ID is `<$ts>-<$seq>`: `$ts` is non-decreasing in `$seq` and `$seq` strictly
increasing, so IDs are strictly increasing like Redis's. An ID given BY a client is a position:
Rule 1: the seq part is authoritative: `1700000000000-42` means seq 42, whatever the ms part.
Rule 2: a seq part of 0 or absent (`1700000000000`, `1700000000000-0`) is a TIME position; it
  sits just before the first record with `$ts >= ms` (Topic.seq_at_ts). Records never have
  seq 0, so a time position never names a record.
Rule 3: `-`/`+` are the ends of the log, `$` is head_seq at the time of the call, `0`/`0-0`
  is "from the beginning of what is retained" (no tombstone, seeds: from_seq = 0), `>` is
  only valid in XREADGROUP (the caller checks, `is_new_only`).
Rule 4: syntax and the exclusive `(` ranges are exactly Redis 7's (same errors, `(-`/`(+`
  invalid, `(` of the largest/smallest ID -> "invalid start/end ID for the interval").
Rule 5: in an ID-mapped topic (one that took a client-chosen ID, engine/log/xids.py) Rules 1-2
  give way to Redis's own order: an ID is compared with the records' IDs as (ms, seq), by
  binary search; `ms` alone is `ms-0` as a start and `ms-<max>` as an end. `0`/`0-0` and the
  specials keep Rule 3.
Rule 6: XREAD's `+` (Redis 7.4, Valkey 8; an extra over 7.0) is the position just before the
  stream's last ID: the read returns the last entry only (whatever COUNT), none if it was
  deleted; blocked, it waits for the next entry. On a stream that never had an entry Redis's
  own "last element ID is 0-0" error.

Public helpers (stable; XGROUP/XREADGROUP/XACK/XCLAIM in the groups*.py families use them):
  parse_id(arg, missing_seq=0) -> StreamId    syntax only, raises Err(INVALID_ID)
  format_id(ts, seq) -> bytes                 `b"<ts>-<seq>"` (engine/log/entries.py: the one
                                              definition, shared with the stored entries)
  entry_id(topic, seq) -> bytes               the ID of an existing seq (its ts looked up)
  range_bounds(topic, start, end) -> (lo, hi) inclusive seq interval for XRANGE/XPENDING
  read_position(topic|None, arg) -> from_seq  XREAD / XGROUP CREATE|SETID cursor: the read
                                              returns seqs > from_seq
  record_seq(arg, topic=None) -> int          XDEL/XACK/XCLAIM: the seq an ID names (0 = none)
  mapped(topic) -> bool                       the topic is ID-mapped (Rule 5)
  time_floor(topic, ms) -> seq                first seq with ts >= ms
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from topicsrv.engine.log import xids
from topicsrv.engine.log.entries import format_id
from topicsrv.engine.log.topic import Topic
from topicsrv.resp.commands.base import Err

U64: Final = (1 << 64) - 1
INVALID_ID: Final = "ERR Invalid stream ID specified as stream command argument"
LAST_ID_ZERO: Final = "ERR the stream last element ID is 0-0"  # XREAD `+` on a stream never written
_DIGITS: Final = frozenset(b"0123456789")


@dataclass(frozen=True, slots=True)
class StreamId:
    ms: int
    seq: int
    complete: bool  # the client gave a seq part


def _u64(part: bytes) -> int:
    if not part or len(part) > 20 or not _DIGITS.issuperset(part):
        raise Err(INVALID_ID)
    v = int(part)
    if v > U64:
        raise Err(INVALID_ID)
    return v


def parse_id(arg: bytes, missing_seq: int = 0) -> StreamId:
    """Syntax of a concrete ID `ms[-seq]` (no specials, no `(`)."""
    ms, dash, seq = arg.partition(b"-")
    if not dash:
        return StreamId(_u64(ms), missing_seq, False)
    return StreamId(_u64(ms), _u64(seq), True)


def mapped(topic: Topic | None) -> bool:
    return topic is not None and topic.xid_since is not None


def entry_id(topic: Topic, seq: int) -> bytes:
    if topic.xid_since is not None:
        return b"%d-%d" % xids.xid_of(topic, seq)
    return format_id(topic.ts_of(seq), seq)


def time_floor(topic: Topic | None, ms: int) -> int:
    if topic is None:
        return 1
    return topic.seq_at_ts(ms)


def _start(topic: Topic | None, arg: bytes) -> int:
    exclusive = arg[:1] == b"("
    if exclusive:
        arg = arg[1:]
        if arg in (b"-", b"+"):
            raise Err(INVALID_ID)
    elif arg == b"-":
        return 0
    elif arg == b"+":
        return U64 + 1
    sid = parse_id(arg, 0)
    if exclusive and sid.ms == U64 and sid.seq == U64:
        raise Err("ERR invalid start ID for the interval")
    if topic is not None and topic.xid_since is not None:
        x = (sid.ms, sid.seq)
        return xids.upper_bound(topic, x) if exclusive else xids.lower_bound(topic, x)
    if sid.seq > 0:
        return sid.seq + 1 if exclusive else sid.seq
    return time_floor(topic, sid.ms)  # `(ms-0` and `ms-0` both start at the first ts >= ms


def _end(topic: Topic | None, arg: bytes) -> int:
    exclusive = arg[:1] == b"("
    if exclusive:
        arg = arg[1:]
        if arg in (b"-", b"+"):
            raise Err(INVALID_ID)
    elif arg == b"+":
        return U64
    elif arg == b"-":
        return -1
    sid = parse_id(arg, U64)
    if exclusive and sid.ms == 0 and sid.seq == 0:
        raise Err("ERR invalid end ID for the interval")
    if topic is not None and topic.xid_since is not None:
        x = (sid.ms, sid.seq)
        return (xids.lower_bound(topic, x) if exclusive else xids.upper_bound(topic, x)) - 1
    if not sid.complete:  # `ms` = ms-MAX: every record with ts <= ms
        return time_floor(topic, sid.ms + 1) - 1
    if sid.seq > 0:
        return sid.seq - 1 if exclusive else sid.seq
    return time_floor(topic, sid.ms) - 1  # `ms-0`: records with ts < ms


def range_bounds(topic: Topic | None, start: bytes, end: bytes) -> tuple[int, int]:
    """Inclusive seq interval [lo, hi] for XRANGE start end (XREVRANGE passes end, start)."""
    lo = _start(topic, start)
    hi = _end(topic, end)
    return lo, hi


def is_new_only(arg: bytes) -> bool:
    return arg == b">"


def read_position(topic: Topic | None, arg: bytes) -> int:
    """The from_seq for an XREAD-style cursor ID: the read returns seqs > from_seq."""
    if arg == b"$":
        return topic.head_seq if topic is not None else 0
    if arg == b">":
        raise Err(
            "ERR The > ID can be specified only when calling XREADGROUP using the "
            "GROUP <group> <consumer> option."
        )
    if arg == b"+":
        return _last_entry_position(topic)
    sid = parse_id(arg, 0)
    if topic is not None and topic.xid_since is not None and (sid.ms or sid.seq):
        return id_cursor(topic, (sid.ms, sid.seq))
    if sid.seq > 0:
        return sid.seq
    if sid.ms == 0:
        # `0` / `0-0` is the cursor 0, as `from_seq: 0` over HTTP: reading starts at what is
        # retained, and a tombstone first reports what capacity loss removed below it
        # (seeds 5.4: from_seq + 1 < evict_floor). Both fronts must say the same.
        return 0
    return time_floor(topic, sid.ms) - 1


def _last_entry_position(topic: Topic | None) -> int:
    """XREAD's `+` (Redis 7.4 / Valkey 8): the stream's last ID minus one, so the read returns
    the last entry if it still exists, and a blocked read waits for the next one; a missing key
    reads from 0 (any new entry). Never below the evict floor: a trimmed-away last entry is no
    loss to report (Rule 6)."""
    if topic is None:
        return 0
    if topic.xid_since is None:
        if topic.head_seq < topic.seq_base:
            raise Err(LAST_ID_ZERO)
        cursor = topic.head_seq - 1
    else:
        ms, n = topic.last_id
        if (ms, n) == (0, 0):
            raise Err(LAST_ID_ZERO)
        cursor = id_cursor(topic, (ms, n - 1) if n else (ms - 1, U64))
    return max(cursor, topic.evict_floor - 1)


def id_cursor(topic: Topic, x: tuple[int, int]) -> int:
    """An ID-mapped topic's read cursor for ID x: the last seq whose ID is <= x (never past
    the visible head); below every retained ID when older seqs existed, the start of the log
    (so a reader that fell behind an eviction is told, Rule 3)."""
    if xids.below_retained(topic, x):
        return max(0, topic.seq_base - 1)
    return min(xids.upper_bound(topic, x) - 1, topic.head_seq)


def record_seq(arg: bytes, topic: Topic | None = None) -> int:
    """The seq an ID names (XDEL, XACK, XCLAIM); 0 when it is a time position (or, in an
    ID-mapped topic, no record has that ID)."""
    sid = parse_id(arg, 0)
    if topic is not None and topic.xid_since is not None:
        return xids.exact(topic, (sid.ms, sid.seq))
    return sid.seq
