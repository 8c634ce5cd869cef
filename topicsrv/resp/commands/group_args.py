"""What the consumer-group command families share (groups.py, groups_ack.py, groups_claim.py,
groups_info.py): registration, key/group lookup with Redis's NOGROUP texts, and the client
positions a group command names. Registers no command.

Rule 1: IDs given by a client are positions (topicsrv.resp.ids): `ms-seq` names seq, a time
position names no record; IDs in replies are the entries' own `<ts>-<seq>` (`delivery_id`).
Rule 2: a PEL interval's time positions are resolved against the PEL itself, not the log
(pending entries may lie below the topic's front).
Rule 3: in an ID-mapped topic (engine/log/xids.py) IDs are resolved against the log's IDs, and a
pending entry shows its record's ID while the record's segment is resident (its `<ms>-<seq>`
once it is gone).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.log import xids
from topicsrv.engine.log.topic import Topic
from topicsrv.resp import ids

# imported for its registrations: the stream family registers before the group families, so
# COMMAND lists commands in the order it did when groups.py imported streams.py
from topicsrv.resp.commands import streams as _streams  # noqa: F401
from topicsrv.resp.commands.base import WRONGTYPE, CommandContext, Err, key_name
from topicsrv.resp.commands.base import command as _command


def command(name: str, arity: int, flags: list[str], first: int, last: int, step: int,
            summary: str, syntax: str, since: str = "5.0.0") -> Any:
    """Register in the "stream" group; `syntax` (topicsrv/resp/argspec.py) feeds COMMAND DOCS."""
    return _command(name, arity, flags, first, last, step, "stream", summary, since, syntax=syntax)


def text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def stream(ctx: CommandContext, key: bytes) -> Topic | None:
    """The log topic named by key, None if absent; WRONGTYPE for a queue topic."""
    topic = ctx.engine.find(key_name(key))
    if topic is not None and topic.type != "log":
        raise Err(WRONGTYPE)
    return topic


def group_or_nogroup(ctx: CommandContext, key: bytes, name: bytes, suffix: str = "") -> tuple[Topic, eg.Group]:
    topic = stream(ctx, key)
    group = eg.find(topic, text(name))
    if topic is None or group is None:
        raise Err(f"NOGROUP No such key '{text(key)}' or consumer group '{text(name)}'{suffix}")
    return topic, group


def mapped_id(topic: Topic | None, seq: int) -> bytes | None:
    """The ID of `seq` in an ID-mapped topic while it is resident (Rule 3), else None."""
    if topic is None or topic.xid_since is None or seq < topic.xid_since:
        return None
    if not topic.segs or not topic.segs[0].base <= seq < topic.next_seq:
        return None
    return b"%d-%d" % xids.xid_of(topic, seq)


def delivery_id(d: eg.Delivery, topic: Topic | None = None) -> bytes:
    return mapped_id(topic, d.seq) or ids.format_id(d.ms, d.seq)


def group_last_id(topic: Topic, g: eg.Group) -> bytes:
    """A group's last-delivered-id."""
    return mapped_id(topic, g.last_seq) or ids.format_id(g.last_ms, g.last_seq)


def history_after(topic: Topic | None, raw: bytes) -> int:
    sid = ids.parse_id(raw, 0)
    if topic is not None and ids.mapped(topic) and (sid.ms or sid.seq):
        x = (sid.ms, sid.seq)
        return 0 if xids.below_retained(topic, x) else xids.upper_bound(topic, x) - 1
    if sid.seq > 0 or sid.ms == 0:
        return sid.seq
    return ids.time_floor(topic, sid.ms) - 1


def _first_at_ms(group: eg.Group, ms: int) -> int:
    """The smallest pending seq whose entry has ms >= `ms` (PEL entries may lie below the topic's
    front, so time positions are resolved against the PEL itself, not the log)."""
    vals = group.pel.values()
    lo, hi = 0, len(vals)
    while lo < hi:
        mid = (lo + hi) // 2
        if vals[mid].ms < ms:
            lo = mid + 1
        else:
            hi = mid
    return vals[lo].seq if lo < len(vals) else ids.U64 + 1


def pel_range(group: eg.Group, start: bytes, end: bytes, topic: Topic | None = None) -> tuple[int, int]:
    """Inclusive seq bounds of a PEL interval (XPENDING, XAUTOCLAIM), Redis's syntax and errors."""
    bounds = ids.range_bounds(topic if ids.mapped(topic) else None, start, end)  # also validates
    if ids.mapped(topic):
        lo, hi = bounds
        if topic is not None and topic.segs and lo <= topic.segs[0].base:
            lo = 0  # pending entries below the resident log (their IDs are gone: Rule 3)
        return lo, hi
    excl, body = start[:1] == b"(", start.lstrip(b"(")
    if body == b"-":
        lo = 0
    elif body == b"+":
        lo = ids.U64 + 1
    else:
        sid = ids.parse_id(body, 0)
        lo = (sid.seq + excl) if sid.seq > 0 else _first_at_ms(group, sid.ms)
    excl, body = end[:1] == b"(", end.lstrip(b"(")
    if body == b"+":
        hi = ids.U64
    elif body == b"-":
        hi = -1
    else:
        sid = ids.parse_id(body, ids.U64)
        if not sid.complete:
            hi = _first_at_ms(group, sid.ms + 1) - 1
        elif sid.seq > 0:
            hi = sid.seq - excl
        else:
            hi = _first_at_ms(group, sid.ms) - 1
    return lo, hi
