"""Consumer-group commands: XGROUP, XREADGROUP, XACK, XPENDING, XINFO GROUPS|CONSUMERS and the
group part of XINFO STREAM [FULL] (XCLAIM/XAUTOCLAIM are in groups_claim.py).

Rule 1: a handler parses ALL its arguments (in redis-server's order, with its error texts)
before it touches state; the state change is one call into `topicsrv.engine.groups`.
Rule 2: IDs given by a client are positions (topicsrv.resp.ids): `ms-seq` names seq, a time
position names no record; IDs in replies are the entries' own `<ts>-<seq>`.
Rule 3: `XREADGROUP ... >` reads through the engine's read pipeline, so a group behind the
evict floor gets the tombstone entry first, exactly like XREAD; its arguments are XREAD's
parser's (stream_args.py), so `NODE n` skips that node's records as in XREAD.
"""

from __future__ import annotations

from typing import Any

import trio

from topicsrv.engine import groups as eg
from topicsrv.engine.topic import Topic
from topicsrv.notify import wait_any
from topicsrv.resp import ids, replysize
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    HOOKS,
    NULL_ARRAY,
    SYNTAX,
    WRONGTYPE,
    CommandContext,
    Err,
    Raw,
    Simple,
    committed,
    container,
    key_name,
    parse_int,
)
from topicsrv.resp.commands.base import command as _command
from topicsrv.resp.commands.stream_args import ReadArgs, parse_read_args
from topicsrv.resp.commands.streams import render_entries

NO_KEY = ("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
          "want to use the MKSTREAM option to create an empty stream automatically.")
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
ENTRIESREAD_RANGE = "ERR value for ENTRIESREAD must be positive or -1"
DOLLAR_IN_GROUP = ("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read "
                   "the history of this consumer by specifying a proper ID, or use the > ID to "
                   "get new messages. The $ ID would just return an empty result set.")
XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
]


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


def delivery_id(d: eg.Delivery) -> bytes:
    return ids.format_id(d.ms, d.seq)


def group_position(topic: Topic | None, raw: bytes) -> tuple[int, int]:
    """(last_seq, last_ms) for XGROUP CREATE/SETID `$`/ID."""
    if raw == b"$":
        if topic is None or topic.head_seq < topic.seq_base:
            return (topic.head_seq if topic else 0), 0
        return topic.head_seq, topic.last_ts
    sid = ids.parse_id(raw, 0)
    if sid.seq > 0:
        return sid.seq, sid.ms
    if sid.ms == 0:
        return (max(0, topic.front - 1) if topic else 0), 0
    return ids.time_floor(topic, sid.ms) - 1, sid.ms


def history_after(topic: Topic | None, raw: bytes) -> int:
    sid = ids.parse_id(raw, 0)
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


def pel_range(group: eg.Group, start: bytes, end: bytes) -> tuple[int, int]:
    """Inclusive seq bounds of a PEL interval (XPENDING, XAUTOCLAIM), Redis's syntax and errors."""
    ids.range_bounds(None, start, end)  # validation only: syntax and interval errors
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


def parse_entries_read(raw: bytes) -> int | None:
    n = parse_int(raw)
    if n < -1:
        raise Err(ENTRIESREAD_RANGE)
    return None if n == -1 else n


# ---- XGROUP ---------------------------------------------------------------------------------

container("xgroup", "stream", "A container for consumer groups commands.", "5.0.0")


def _subcommand_syntax(name: str) -> Err:
    return Err(f"ERR unknown subcommand or wrong number of arguments for '{name}'. Try XGROUP HELP.")


@command("xgroup|create", -5, ["write", "denyoom"], 2, 2, 1, "Creates a consumer group.",
         "key:key group:string (id:string|$) [MKSTREAM] [ENTRIESREAD:entries-read:integer]")
def xgroup_create(ctx: CommandContext, args: list[bytes]) -> Any:
    key, name, raw_id, opts = args[0], args[1], args[2], args[3:]
    if len(args) > 6:
        raise _subcommand_syntax("CREATE")
    mkstream, entries_read = False, None
    a = Args(opts)
    while a:
        if a.flag(b"mkstream"):
            mkstream = True
        elif a.option(b"entriesread"):
            entries_read = parse_entries_read(a.next())
        else:
            raise _subcommand_syntax("CREATE")
    topic = stream(ctx, key)
    if raw_id != b"$":
        ids.parse_id(raw_id, 0)
    if topic is None:
        if not mkstream:
            raise Err(NO_KEY)
        topic = ctx.engine.put_topic(key_name(key), {})[0]
    last_seq, last_ms = group_position(topic, raw_id)
    group, token = ctx.engine.group_create(topic, text(name), last_seq, last_ms, entries_read)
    if group is None:
        raise Err(BUSYGROUP)
    return committed(token, Simple("OK"))


@command("xgroup|setid", -5, ["write"], 2, 2, 1, "Sets the last-delivered ID of a consumer group.",
         "key:key group:string (id:string|$) [ENTRIESREAD:entries-read:integer]")
def xgroup_setid(ctx: CommandContext, args: list[bytes]) -> Any:
    key, name, raw_id = args[0], args[1], args[2]
    entries_read = None
    if len(args) == 5 and args[3].upper() == b"ENTRIESREAD":
        entries_read = parse_entries_read(args[4])
    elif len(args) != 3:
        raise _subcommand_syntax("SETID")
    topic, group = _existing_group(ctx, key, name)
    if raw_id != b"$":
        ids.parse_id(raw_id, 0)
    last_seq, last_ms = group_position(topic, raw_id)
    token = ctx.engine.group_setid(topic, group, last_seq, last_ms, entries_read)
    return committed(token, Simple("OK"))


def _existing_group(ctx: CommandContext, key: bytes, name: bytes) -> tuple[Topic, eg.Group]:
    topic = stream(ctx, key)
    if topic is None:
        raise Err(NO_KEY)
    group = eg.find(topic, text(name))
    if group is None:
        raise Err(f"NOGROUP No such consumer group '{text(name)}' for key name '{text(key)}'")
    return topic, group


@command("xgroup|destroy", 4, ["write"], 2, 2, 1, "Destroys a consumer group.",
         "key:key group:string")
def xgroup_destroy(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err(NO_KEY)
    ok, token = ctx.engine.group_destroy(topic, text(args[1]))
    if not ok:
        return 0
    return committed(token, 1)


@command("xgroup|createconsumer", 5, ["write", "denyoom"], 2, 2, 1,
         "Creates a consumer in a consumer group.", "key:key group:string consumer:string", "6.2.0")
def xgroup_createconsumer(ctx: CommandContext, args: list[bytes]) -> Any:
    topic, group = _existing_group(ctx, args[0], args[1])
    ok, token = ctx.engine.group_create_consumer(topic, group, text(args[2]))
    if not ok:
        return 0
    return committed(token, 1)


@command("xgroup|delconsumer", 5, ["write"], 2, 2, 1, "Deletes a consumer from a consumer group.",
         "key:key group:string consumer:string")
def xgroup_delconsumer(ctx: CommandContext, args: list[bytes]) -> Any:
    topic, group = _existing_group(ctx, args[0], args[1])
    pending, token = ctx.engine.group_delete_consumer(topic, group, text(args[2]))
    return committed(token, pending)


@command("xgroup|help", 2, ["loading", "stale"], 0, 0, 0,
         "Returns helpful text about the different subcommands.", "")
def xgroup_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in XGROUP_HELP]


# ---- XREADGROUP -----------------------------------------------------------------------------


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
            if group.last_seq >= topic.head_seq and group.cursor >= topic.head_seq:
                group.touch(consumer, now)
                continue
            if room <= 0:  # the reply is full: this stream is served by the next read
                continue
            window = replysize.group_window(ctx, topic, group.cursor, count, room)
            res = eg.read_new(topic, group, consumer, window, now, noack=ra.noack, nodes=ra.nodes)
            if ra.nodes and not res.records and res.tombstone is None:
                continue  # only that node's records were new: nothing for this reader (as XREAD)
            room -= sum(map(len, res.records)) + len(key)
            out.append((key, render_entries(topic, res)))
        else:
            hist = eg.read_history(topic, group, consumer, history_after(topic, raw), count, now)
            out.append((key, [Raw(b) if b is not None else [delivery_id(d), NULL_ARRAY] for d, b in hist]))
    return out


@command("xreadgroup", -7, ["write", "blocking", "movablekeys"], 0, 0, 0,
         "Returns new or historical messages from a stream for a consumer in a group. Blocks "
         "until a message is available otherwise.",
         "GROUP group:string consumer:string [COUNT:count:integer] [BLOCK:milliseconds:integer] "
         "[NOACK] [NODE:node:string]... STREAMS key:key... id:string...")
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


async def _wait(ctx: CommandContext, ra: ReadArgs) -> Any:
    """BLOCK: wait for an append to any of the streams (BLOCK 0 = forever)."""
    notifier = ctx.server.notifier
    deadline = None if ra.timeout is None else trio.current_time() + ra.timeout
    while True:
        remaining = None if deadline is None else deadline - trio.current_time()
        if remaining is not None and remaining <= 0:
            return NULL_ARRAY
        events = [notifier.event(key_name(k)) for k in ra.keys]  # before the read (notify Rule 1)
        served = _serve(ctx, ra)
        if served:
            return _reply(ctx, served)
        await wait_any(events, remaining)


# ---- XACK, XPENDING ---------------------------------------------------------------------------


@command("xack", -4, ["write", "fast"], 1, 1, 1,
         "Returns the number of messages that were successfully acknowledged by the consumer "
         "group member of a stream.", "key:key group:string id:string...")
def xack(ctx: CommandContext, args: list[bytes]) -> Any:
    seqs = [ids.parse_id(a, 0).seq for a in args[2:]]
    topic = stream(ctx, args[0])
    group = eg.find(topic, text(args[1]))
    if group is None:
        return 0
    return eg.ack(group, [s for s in seqs if s > 0])


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
        lo, hi = pel_range(group, start, end)
    if argc == 3:
        n, first, last, per = eg.pending_summary(group)
        if not n:
            return [0, None, None, NULL_ARRAY]
        assert first is not None and last is not None
        return [n, delivery_id(first), delivery_id(last), [[c, str(k)] for c, k in per]]
    rows = eg.pending_range(group, lo, hi, count, now, consumer, min_idle)
    return [[delivery_id(d), d.consumer, d.idle(now), d.count] for d in rows]


# ---- XINFO GROUPS | CONSUMERS, and XINFO STREAM's group part ---------------------------------


def group_info(topic: Topic, g: eg.Group) -> dict[str, Any]:
    return {
        "name": g.name,
        "consumers": len(g.consumers),
        "pending": len(g.pel),
        "last-delivered-id": ids.format_id(g.last_ms, g.last_seq),
        "entries-read": g.entries_read,
        "lag": eg.lag(topic, g),
    }


@command("xinfo|groups", 3, ["readonly"], 2, 2, 1,
         "Returns a list of the consumer groups of a stream.", "key:key")
def xinfo_groups(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err("ERR no such key")
    gs = eg.groups_of(topic)
    return [group_info(topic, g) for g in gs] if gs is not None else []


@command("xinfo|consumers", 4, ["readonly"], 2, 2, 1,
         "Returns a list of the consumers in a consumer group.", "key:key group:string")
def xinfo_consumers(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = stream(ctx, args[0])
    if topic is None:
        raise Err("ERR no such key")
    group = eg.find(topic, text(args[1]))
    if group is None:
        raise Err(f"NOGROUP No such consumer group '{text(args[1])}' for key name '{text(args[0])}'")
    now = ctx.engine.now()
    return [{"name": c.name, "pending": len(c.pel), "idle": max(0, now - c.seen_time)}
            for c in group.consumers.values()]


def _groups_count(ctx: CommandContext, topic: Topic) -> int:
    gs = eg.groups_of(topic)
    return 0 if gs is None else len(gs)


def _full_groups(ctx: CommandContext, topic: Topic, count: int) -> list[Any]:
    gs = eg.groups_of(topic)
    out: list[Any] = []
    for g in gs or ():
        pel = list(g.pel.values())
        if count:
            pel = pel[:count]
        consumers = []
        for c in g.consumers.values():
            own = list(c.pel.values())[:count] if count else list(c.pel.values())
            consumers.append({
                "name": c.name, "seen-time": c.seen_time, "pel-count": len(c.pel),
                "pending": [[delivery_id(d), d.time, d.count] for d in own],
            })
        out.append({
            "name": g.name, "last-delivered-id": ids.format_id(g.last_ms, g.last_seq),
            "entries-read": g.entries_read, "lag": eg.lag(topic, g), "pel-count": len(g.pel),
            "pending": [[delivery_id(d), d.consumer, d.time, d.count] for d in pel],
            "consumers": consumers,
        })
    return out


HOOKS["xinfo_stream_groups_count"] = _groups_count
HOOKS["xinfo_stream_full_groups"] = _full_groups

