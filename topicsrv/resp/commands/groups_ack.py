"""Delivery to a consumer group and its pending entries list: XREADGROUP, XACK, XPENDING.

Rule 1: every argument is parsed (redis-server's order and error texts) before state is
touched; delivery and acknowledgement are calls into `topicsrv.engine.groups`.
Rule 2: `XREADGROUP ... >` reads through the engine's read pipeline, so a group behind the
evict floor gets the tombstone entry first, exactly like XREAD; its arguments are XREAD's
parser's (stream_args.py), so `NODE n` skips that node's records as in XREAD.
Rule 3: positions and PEL intervals follow group_args.py Rules 1-2.
Rule 4: `CLAIM min-idle-time` (Redis 8.4) with `>`: idle pending entries of any consumer come
first (engine/groups/groupclaim.py Rule 3), then new ones, COUNT covering both; every entry of such a
reply is `[id, fields, idle-ms, delivery-count]` (0 and 0 for a new entry or a tombstone);
NOACK applies to the new ones only. A BLOCK also wakes when an entry becomes claimable.
Rule 5 (BLOCK): a reader that finds nothing waits in the line of each (stream, group) it reads
(topicsrv/notify/lines.py), FIFO as redis-server serves blocked clients: a write of K new
entries makes as many readers ready as COUNT says K entries serve (COUNT 0: one), the first
to block first; the rest stay parked. The wait is a `RespBlock` (no task of its own), served
by the notifier with the same `_serve` pass the command made first.
"""

from __future__ import annotations

from typing import Any

from topicsrv.engine import groups as eg
from topicsrv.engine.log.blobs import nbytes
from topicsrv.engine.log.reads import ReadResult
from topicsrv.engine.log.topic import Topic
from topicsrv.notify import NOTHING, UNLIMITED
from topicsrv.notify.lines import Line
from topicsrv.resp import ids, replysize
from topicsrv.resp.blocked import RespBlock
from topicsrv.resp.commands.base import (
    NULL_ARRAY,
    SYNTAX,
    CommandContext,
    Err,
    Raw,
    key_name,
    parse_int,
)
from topicsrv.resp.commands.group_args import (
    command,
    delivery_id,
    group_or_nogroup,
    history_after,
    pel_range,
    stream,
    text,
)
from topicsrv.resp.commands.stream_args import ReadArgs, parse_read_args
from topicsrv.resp.commands.streams import render_entries

DOLLAR_IN_GROUP = ("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read "
                   "the history of this consumer by specifying a proper ID, or use the > ID to "
                   "get new messages. The $ ID would just return an empty result set.")

# ---- XREADGROUP -----------------------------------------------------------------------------


def _claimed_entry(blob: bytes, idle: int, count: int) -> bytes:
    """An entry with Redis 8.4's CLAIM extension: [id, fields, idle ms, delivery count]."""
    assert blob[:4] == b"*2\r\n"
    return b"*4\r\n%b:%d\r\n:%d\r\n" % (blob[4:], idle, count)


def _render_claim(topic: Topic, claimed: list[eg.Claimed], res: ReadResult | None) -> Raw:
    """CLAIM's entries: the claimed ones first, then the new ones (idle 0, count 0)."""
    parts = [_claimed_entry(c.entry, c.idle, c.count) for c in claimed if c.entry is not None]
    if res is not None:
        if res.tombstone is not None:
            parts.append(_claimed_entry(res.tombstone.resp_entry(), 0, 0))
        parts.extend(_claimed_entry(b, 0, 0) for b in res.records)
    return Raw(b"*%d\r\n%b" % (len(parts), b"".join(parts)))


def _serve(ctx: CommandContext, ra: ReadArgs) -> list[tuple[bytes, Any]]:
    """One non-blocking pass: [(key, entries)] for the streams that have something."""
    assert ra.group is not None and ra.consumer is not None
    group_name, consumer, count = ra.group, ra.consumer, ra.count
    now = ctx.engine.now()
    out: list[tuple[bytes, Any]] = []
    room = replysize.budget(ctx)  # entries are sized before delivery (replysize Rule 2)
    for key, raw in zip(ra.keys, ra.ids, strict=True):
        topic, group = group_or_nogroup(ctx, key, group_name.encode("utf-8", "surrogateescape"),
                                        " in XREADGROUP with GROUP option")
        if raw == b">":
            claimed: list[eg.Claimed] = []
            if ra.claim is not None and room > 0:  # idle pending entries first (Redis 8.4)
                claimed = eg.claim_idle(topic, group, consumer, ra.claim, count, now)
                room -= sum(len(c.entry or b"") for c in claimed)
            res: ReadResult | None = None
            if group.last_seq >= topic.head_seq and group.cursor >= topic.head_seq:
                group.touch(consumer, now)
            elif room > 0 and not (count and len(claimed) >= count):
                left = count - len(claimed) if count else 0
                window = replysize.group_window(ctx, topic, group.cursor, left, room)
                res = eg.read_new(topic, group, consumer, window, now, noack=ra.noack, nodes=ra.nodes)
                if not res.records and res.tombstone is None:
                    res = None  # the new records were deleted (XDEL) or were that NODE's:
                    # nothing for this reader, so a BLOCK waits on (as Redis and XREAD)
            ctx.engine.journal.group_progress(  # replicas follow (groupops.py Rule 3)
                topic, group, (consumer,),
                [c.delivery.seq for c in claimed] + (list(res.seqs) if res is not None else []))
            if res is None and not claimed:
                continue
            if res is not None:
                room -= nbytes(res.records) + len(key)
            if ra.claim is None:
                assert res is not None
                out.append((key, render_entries(topic, res)))
            else:
                out.append((key, _render_claim(topic, claimed, res)))
        else:
            hist = eg.read_history(topic, group, consumer, history_after(topic, raw), count, now)
            ctx.engine.journal.group_progress(topic, group, (consumer,), [d.seq for d, _ in hist])
            out.append((key, [Raw(b) if b is not None else [delivery_id(d, topic), NULL_ARRAY] for d, b in hist]))
    return out


def _claim_wait(ctx: CommandContext, ra: ReadArgs) -> float | None:
    """Seconds until a pending entry of the read streams becomes claimable (BLOCK ... CLAIM
    also wakes then), None when none will."""
    if ra.claim is None:
        return None
    assert ra.group is not None
    now = ctx.engine.now()
    at = [eg.next_ripe(g, ra.claim, now) for g in
          (eg.find(stream(ctx, k), ra.group) for k in ra.keys) if g is not None]
    soonest = min((t for t in at if t is not None), default=None)
    return None if soonest is None else max(soonest - now, 1) / 1000.0


@command("xreadgroup", -7, ["write", "blocking", "movablekeys"], 0, 0, 0,
         "Returns new or historical messages from a stream for a consumer in a group. Blocks "
         "until a message is available otherwise.",
         "GROUP group:string consumer:string [COUNT:count:integer] [BLOCK:milliseconds:integer] "
         "[CLAIM:min-idle-time:integer] [NOACK] [NODE:node:string]... STREAMS key:key... "
         "id:string...")
def xreadgroup(ctx: CommandContext, args: list[bytes]) -> Any:
    ra = parse_read_args(args, group=True)
    assert ra.group is not None
    group_name = ra.group.encode("utf-8", "surrogateescape")
    for key, raw in zip(ra.keys, ra.ids, strict=True):
        group_or_nogroup(ctx, key, group_name, " in XREADGROUP with GROUP option")
        if raw == b"$":
            raise Err(DOLLAR_IN_GROUP)
        if raw != b">":
            ids.parse_id(raw, 0)
    served = _serve(ctx, ra)
    if served:
        return _reply(ctx, served)
    if not ra.block or not all(raw == b">" for raw in ra.ids):
        return NULL_ARRAY
    return _wait(ctx, ra)


def _reply(ctx: CommandContext, served: list[tuple[bytes, Any]]) -> Any:
    if ctx.resp3:
        return {k: entries for k, entries in served}
    return [[k, entries] for k, entries in served]


WAKE_ALL = 1 << 30  # a line whose stream or group is gone: every reader answers (NOGROUP)


def group_line(ctx: CommandContext, name: str, group: str) -> Line:
    """Rule 5: the line of the blocked readers of (stream, group); its supply is the entries
    after the group's cursor (deleted ones included: an upper bound)."""
    engine = ctx.engine

    def supply() -> int:
        topic = engine.topics.get(name)
        g = None if topic is None else eg.find(topic, group)
        if g is None:
            return WAKE_ALL
        return max(0, int(topic.head_seq) - g.cursor)

    return ctx.server.notifier.line(("xreadgroup", name, group), name, supply)


def _wait(ctx: CommandContext, ra: ReadArgs) -> RespBlock:
    """BLOCK: wait in the lines of the streams read (Rule 5; BLOCK 0 = forever)."""
    assert ra.group is not None
    group = ra.group

    def attempt() -> Any:
        served = _serve(ctx, ra)
        return _reply(ctx, served) if served else NOTHING

    lines = [group_line(ctx, key_name(k), group) for k in dict.fromkeys(ra.keys)]
    return RespBlock(ctx, attempt, lines=lines, demand=ra.count or UNLIMITED,
                     timeout_s=ra.timeout,
                     recheck=None if ra.claim is None else lambda: _claim_wait(ctx, ra))


# ---- XACK, XPENDING ---------------------------------------------------------------------------


@command("xack", -4, ["write", "fast"], 1, 1, 1,
         "Returns the number of messages that were successfully acknowledged by the consumer "
         "group member of a stream.", "key:key group:string id:string...")
def xack(ctx: CommandContext, args: list[bytes]) -> Any:
    for a in args[2:]:
        ids.parse_id(a, 0)
    topic = stream(ctx, args[0])
    group = eg.find(topic, text(args[1]))
    if topic is None or group is None:
        return 0
    seqs = [s for s in (ids.record_seq(a, topic) for a in args[2:]) if s > 0]
    done = eg.ack(group, seqs)
    ctx.engine.journal.group_progress(topic, group, (), seqs)  # groupops.py Rule 3
    return done


@command("xpending", -3, ["readonly"], 1, 1, 1,
         "Returns the information and entries from a stream consumer group's pending entries "
         "list.", "key:key group:string [[IDLE:min-idle-time:integer] start:string end:string "
         "count:integer [consumer:string]]")
def xpending(ctx: CommandContext, args: list[bytes]) -> Any:
    argc = len(args) + 1
    if argc != 3 and (argc < 6 or argc > 9):
        raise Err(SYNTAX)
    min_idle, consumer = 0, None
    if argc >= 6:
        at = 2
        if args[2].upper() == b"IDLE":
            min_idle = parse_int(args[3])
            if argc < 8:
                raise Err(SYNTAX)
            at += 2
        count = max(0, parse_int(args[at + 2]))
        start, end = args[at], args[at + 1]
        ids.range_bounds(None, start, end)
        if at + 3 < len(args):
            consumer = text(args[at + 3])
    topic, group = group_or_nogroup(ctx, args[0], args[1])
    now = ctx.engine.now()
    if argc != 3:
        lo, hi = pel_range(group, start, end, topic)
    if argc == 3:
        n, first, last, per = eg.pending_summary(group)
        if not n:
            return [0, None, None, NULL_ARRAY]
        assert first is not None and last is not None
        return [n, delivery_id(first, topic), delivery_id(last, topic), [[c, str(k)] for c, k in per]]
    rows = eg.pending_range(group, lo, hi, count, now, consumer, min_idle)
    return [[delivery_id(d, topic), d.consumer, d.idle(now), d.count] for d in rows]
