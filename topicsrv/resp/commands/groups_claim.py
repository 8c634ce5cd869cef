"""XCLAIM and XAUTOCLAIM: moving pending entries between consumers of a group.

Rule 1: like redis-server, the key/group lookup (NOGROUP) comes first, then every argument is
parsed, and only then does the engine change ownership (all or nothing).
Rule 2: an entry that left the log (XDEL, trim, TTL) is dropped from the PEL instead of being
claimed; XAUTOCLAIM lists those ids in its third reply element (Redis 7).
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.log.topic import Topic
from topicsrv.resp import ids
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import CommandContext, Err, Raw, parse_int
from topicsrv.resp.commands.group_args import (
    command,
    delivery_id,
    group_or_nogroup,
    pel_range,
    text,
)


def _claimed(c: eg.Claimed, topic: Topic) -> Any:
    return delivery_id(c.delivery, topic) if c.entry is None else Raw(c.entry)


@command("xclaim", -6, ["write", "fast"], 1, 1, 1,
         "Changes, or acquires, ownership of a message in a consumer group, as if the message "
         "was delivered to a consumer group member.",
         "key:key group:string consumer:string min-idle-time:string id:string... "
         "[IDLE:ms:integer] [TIME:unix-time-milliseconds:unix-time] [RETRYCOUNT:count:integer] "
         "[FORCE] [JUSTID] [LASTID:lastid:string]")
def xclaim(ctx: CommandContext, args: list[bytes]) -> Any:
    topic, group = group_or_nogroup(ctx, args[0], args[1])
    min_idle = parse_int(args[3], "ERR Invalid min-idle-time argument for XCLAIM")
    seqs: list[int] = []
    a = Args(args, 4)
    while a:  # IDs up to the first argument that is not one (Redis: the options start there)
        try:
            seqs.append(ids.record_seq(a.peek(), topic))
        except Err:
            break
        a.next()
    now = ctx.engine.now()
    delivery_time: int | None = None
    retrycount: int | None = None
    force = justid = False
    last: tuple[int, int] | None = None
    while a:
        if a.flag(b"force"):
            force = True
        elif a.flag(b"justid"):
            justid = True
        elif a.option(b"idle"):
            delivery_time = now - a.next_int("ERR Invalid IDLE option argument for XCLAIM")
        elif a.option(b"time"):
            delivery_time = a.next_int("ERR Invalid TIME option argument for XCLAIM")
        elif a.option(b"retrycount"):
            retrycount = a.next_int("ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif a.option(b"lastid"):
            sid = a.next_id(0)
            if ids.mapped(topic) and (sid.ms or sid.seq):
                pos = ids.id_cursor(topic, (sid.ms, sid.seq))
            else:
                pos = sid.seq if sid.seq > 0 or sid.ms == 0 else ids.time_floor(topic, sid.ms) - 1
            last = (sid.ms, pos)
        else:
            raise Err(f"ERR Unrecognized XCLAIM option '{text(a.peek())}'")
    wanted = [s for s in seqs if s > 0]
    got = eg.claim(topic, group, text(args[2]), min_idle, wanted, now,
                   delivery_time=delivery_time, retrycount=retrycount, force=force,
                   justid=justid, last=last)
    ctx.engine.journal.group_progress(topic, group, (text(args[2]),), wanted)  # groupops Rule 3
    return [_claimed(c, topic) for c in got]


@command("xautoclaim", -6, ["write", "fast"], 1, 1, 1,
         "Changes, or acquires, ownership of messages in a consumer group, as if the messages "
         "were delivered to as consumer group member.",
         "key:key group:string consumer:string min-idle-time:string start:string "
         "[COUNT:count:integer] [JUSTID]", "6.2.0")
def xautoclaim(ctx: CommandContext, args: list[bytes]) -> Any:
    # Redis's order: the arguments are checked before the key and group (NOGROUP)
    min_idle = parse_int(args[3], "ERR Invalid min-idle-time argument for XAUTOCLAIM")
    ids.range_bounds(None, args[4], b"+")  # the start ID's syntax
    count, justid = 100, False
    a = Args(args, 5)
    while a:
        if a.option(b"count"):
            count = a.next_int("ERR COUNT must be > 0")
            if count < 1 or count > (1 << 63) // 10:
                raise Err("ERR COUNT must be > 0")
        elif a.flag(b"justid"):
            justid = True
        else:
            raise a.syntax_error()
    topic, group = group_or_nogroup(ctx, args[0], args[1])
    start, _ = pel_range(group, args[4], b"+", topic)
    nxt, claimed, deleted = eg.autoclaim(topic, group, text(args[2]), min_idle, start, count,
                                         ctx.engine.now(), justid=justid)
    ctx.engine.journal.group_progress(  # replicas follow (groupops.py Rule 3)
        topic, group, (text(args[2]),), [c.delivery.seq for c in claimed] + [d.seq for d in deleted])
    return [
        b"0-0" if nxt is None else delivery_id(nxt, topic),
        [_claimed(c, topic) for c in claimed],
        [delivery_id(d, topic) for d in deleted],
    ]
