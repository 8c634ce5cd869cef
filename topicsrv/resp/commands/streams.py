"""Stream commands: XADD XREAD XRANGE XREVRANGE XLEN XDEL XTRIM XINFO STREAM|HELP.

Behaviour and error texts are redis-server 7's, with the designed differences of API.md 9:
an ID argument is a position (ids.py; Redis's own order once a topic took a client-chosen
ID: engine/log/xids.py);
`MAXLEN`/`MINID` (XADD, XTRIM) are capacity trims that advance evict_floor (tombstone reason
`cap`), trimmed exactly even with `~`, with Redis 8.2's `KEEPREF|DELREF|ACKED` (apply_trim);
`XDEL` is a silent delete (XDELEX/XACKDEL: streams_refs.py).

Rule 1 (hot path): entries are the engine's pre-encoded RESP blobs, spliced as one `Raw`
array; nothing is re-encoded per record.
Rule 2 (loss is never silent): a read whose cursor crossed evict_floor gets the tombstone
entry FIRST: `[id, ["$type","tombstone","gap_from",..,"gap_to",..,"reason",..,
"missed_estimate",..,"earliest_seq",..,"head_seq",..]]`, id `<ts>-<earliest_seq - 1>`
(= gap_to for cap/ttl/lost), ts = the ts of the first record after the gap (or the topic's
last ts), so ids stay increasing and resuming after it is exact.

Rule 3: no reply exceeds client-output-limit: XRANGE/XREVRANGE past it are refused (use
COUNT), XREAD delivers what fits (topicsrv/resp/replysize.py).

Public helpers (stable; groups_ack.py reuses them for XREADGROUP):
  render_entries(topic, result) -> Raw                 the entry array of a ReadResult
  render_read(topic, key, result) -> list | None       `[key, entries]`, None when empty
  read_reply(ctx, items) -> Any                        RESP2 array / RESP3 map of items
Arguments are parsed by stream_args.py (XADD, XTRIM, XREAD, XREADGROUP) and args.py.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from topicsrv.bus.keyspace import NEW, STREAM
from topicsrv.engine.groups import entries_added, grouprefs
from topicsrv.engine.log import xids
from topicsrv.engine.log.blobs import joined, nbytes
from topicsrv.engine.log.idempotency import auto_iid
from topicsrv.engine.log.reads import FMT_RESP, ReadResult, scan_range
from topicsrv.engine.log.records import PreparedRecord, prepare_fields, prepare_fields_in_slices
from topicsrv.engine.log.segments import DELETED
from topicsrv.engine.log.topic import Topic
from topicsrv.notify import NOTHING
from topicsrv.resp import ids, replysize
from topicsrv.resp.args import Args
from topicsrv.resp.blocked import RespBlock
from topicsrv.resp.commands.base import (
    HOOKS,
    NULL_ARRAY,
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
from topicsrv.resp.commands.idmp import idmp_fields
from topicsrv.resp.commands.stream_args import (
    ReadArgs,
    Trim,
    XAdd,
    parse_read_args,
    parse_xadd,
    parse_xtrim,
)

XREAD_ALL = 1_000_000  # "no COUNT": examine up to this many slots per stream per call
OFFLOAD_FIELDS = 4096  # an XADD with more field/value items is encoded off the event loop


def give_up_gil() -> None:
    """Between two slices of an offloaded encoding: `sleep(0)` releases the GIL, so the
    event loop's thread runs if it is waiting for it."""
    time.sleep(0)


# ---- rendering ---------------------------------------------------------------------------


def render_entries(topic: Topic, result: ReadResult) -> Raw:
    n = len(result.records)
    if result.tombstone is None:
        return Raw(b"*%d\r\n%b" % (n, joined(result.records)))
    tomb = result.tombstone.resp_entry()
    return Raw(b"*%d\r\n%b%b" % (n + 1, tomb, joined(result.records)))


def render_read(topic: Topic, key: bytes, result: ReadResult) -> list[Any] | None:
    if not result.records and result.tombstone is None:
        return None
    return [key, render_entries(topic, result)]


def read_reply(ctx: CommandContext, items: list[list[Any]]) -> Any:
    """XREAD's reply: an array of [key, entries] (RESP2) or a map key -> entries (RESP3)."""
    if ctx.client.protocol == 3:
        return {k: v for k, v in items}
    return items


# ---- trims -------------------------------------------------------------------------------


def apply_trim(ctx: CommandContext, name: str, trim: Trim) -> tuple[int, Any]:
    """XTRIM / XADD's trim, with its reference policy (engine/groups/grouprefs.py Rule 3: ACKED stops
    at the first entry a group still references; DELREF drops the trimmed from the PELs)."""
    topic = ctx.engine.find(name)
    if topic is None:
        return 0, None
    floor = grouprefs.acked_floor(topic) if trim.policy == grouprefs.ACKED else None
    front = topic.front
    if trim.strategy == "maxlen":
        assert isinstance(trim.threshold, int)
        maxlen = trim.threshold
        if trim.limit:
            maxlen = max(maxlen, topic.count - trim.limit)
        if floor is not None:
            maxlen = max(maxlen, topic.count - grouprefs.live_below(topic, floor))
        if topic.count <= maxlen:
            return 0, None
        n, token = ctx.engine.trim(name, maxlen=maxlen)
    else:
        assert isinstance(trim.threshold, ids.StreamId)
        sid = trim.threshold
        if ids.mapped(topic):  # keep the records whose ID is >= the threshold
            bound = xids.lower_bound(topic, (sid.ms, sid.seq))
        else:
            bound = sid.seq if sid.seq > 0 else ids.time_floor(topic, sid.ms)
        bound = min(bound, topic.next_seq, topic.next_seq if floor is None else floor)
        if bound <= topic.front:
            return 0, None
        n, token = ctx.engine.trim(name, minid_seq=bound)
    if trim.policy == grouprefs.DELREF:
        grouprefs.drop_refs_between(topic, front, topic.front)
    return n, token


# ---- commands ----------------------------------------------------------------------------


def command(name: str, arity: int, flags: list[str], first: int, last: int, step: int,
            summary: str, syntax: str, since: str = "5.0.0", complexity: str | None = None) -> Any:
    return _command(name, arity, flags, first, last, step, "stream", summary, since,
                    syntax=syntax, complexity=complexity)


@command("xadd", -5, ["write", "denyoom", "fast"], 1, 1, 1,
         "Appends a new message to a stream. Creates the key if it doesn't exist.",
         "key:key [NOMKSTREAM] [(KEEPREF|DELREF|ACKED)] [(IDMPAUTO:producer-id:string|"
         "IDMP:producer-id:string idempotent-id:string)] [NODE:node:string] [TAG:tag:string] "
         "[(MAXLEN|MINID) [(=|~)] threshold:string [LIMIT:count:integer]] (*|id:string) "
         "(field:string value:string)...", complexity="O(1) when adding a new entry")
def xadd(ctx: CommandContext, args: list[bytes]) -> Any:
    x = parse_xadd(args)
    name = key_name(x.key)
    if x.nomkstream and ctx.engine.find(name) is None:
        return None
    if len(x.pairs) > OFFLOAD_FIELDS and not ctx.client.script:  # a script cannot wait: it
        return _xadd_offloaded(ctx, name, x)  # runs atomically on the loop, encodes in line
    return _append(ctx, name, prepare_fields(x.pairs, x.node, x.tag), x.trim, x.xid, idmp_key(x))


def idmp_key(x: XAdd) -> tuple[bytes, bytes] | None:
    """IDMP's (producer, iid); IDMPAUTO's iid from the content (engine/log/idempotency.py)."""
    if x.idmp is None:
        return None
    pid, iid = x.idmp
    return pid, iid if iid is not None else auto_iid(x.pairs)


def _append(ctx: CommandContext, name: str, rec: PreparedRecord, trim: Trim | None,
            xid: tuple[int, int | None] | None = None, idmp: tuple[bytes, bytes] | None = None) -> Any:
    ks = ctx.server.bus.keyspace
    new = bool(ks.flags) and ctx.engine.find(name) is None  # keyspace notifications are on
    result, token = ctx.engine.write(name, [rec], xid=xid, idmp=idmp)
    planned = result.get("xids")
    reply = b"%d-%d" % planned[0] if planned else ids.format_id(result["ts"], result["first_seq"])
    trimmed = 0
    if trim is not None and not result["duplicate"]:  # a duplicate changes nothing (Redis)
        trimmed, token2 = apply_trim(ctx, name, trim)
        token = token2 or token
    if ks.flags:  # as redis-server: `new` (the key was created), `xadd`, then `xtrim`
        key = name.encode("latin-1")
        if new:
            ks.notify(NEW, b"new", key)
        if not result["duplicate"]:
            ks.notify(STREAM, b"xadd", key)
        if trimmed:
            ks.notify(STREAM, b"xtrim", key)
    return committed(token, reply)


async def _xadd_offloaded(ctx: CommandContext, name: str, x: XAdd) -> Any:
    """A record of very many fields is validated and encoded (pure work, O(fields)) in a
    worker thread, so the event loop serves other clients meanwhile (1M fields: ~0.4 s of
    Python); the write itself stays on the loop, as every engine call does. The encoding
    pauses between slices (`give_up_gil`): the compiled encoder would otherwise hold the GIL,
    and so the loop, for the whole record."""
    rec = await trio.to_thread.run_sync(prepare_fields_in_slices, x.pairs, x.node, x.tag,
                                        give_up_gil)
    key = await trio.to_thread.run_sync(idmp_key, x)
    if x.nomkstream and ctx.engine.find(name) is None:
        return None
    return _append(ctx, name, rec, x.trim, x.xid, key)


def _range(ctx: CommandContext, args: list[bytes], reverse: bool) -> Any:
    name = key_name(args[0])
    topic = ctx.engine.find(name)
    if reverse:
        lo, hi = ids.range_bounds(topic, args[2], args[1])
    else:
        lo, hi = ids.range_bounds(topic, args[1], args[2])
    count = -1
    a = Args(args, 3)
    while a:
        if not a.option(b"count"):
            raise a.syntax_error()
        count = max(0, a.next_int())
    if topic is None:
        return Raw(b"*0\r\n")
    if count == 0:  # Redis: COUNT 0 on an existing key is a null array
        return NULL_ARRAY
    if lo > hi:
        return Raw(b"*0\r\n")
    found = replysize.bounded_range(ctx, topic, lo, hi, max(count, 0), reverse)
    return Raw(b"*%d\r\n%b" % (len(found), found.joined()))


@command("xrange", -4, ["readonly"], 1, 1, 1,
         "Returns the messages from a stream within a range of IDs.",
         "key:key start:string end:string [COUNT:count:integer]", complexity="O(N)")
def xrange(ctx: CommandContext, args: list[bytes]) -> Any:
    return _range(ctx, args, False)


@command("xrevrange", -4, ["readonly"], 1, 1, 1,
         "Returns the messages from a stream within a range of IDs in reverse order.",
         "key:key end:string start:string [COUNT:count:integer]", complexity="O(N)")
def xrevrange(ctx: CommandContext, args: list[bytes]) -> Any:
    return _range(ctx, args, True)


@command("xlen", 2, ["readonly", "fast"], 1, 1, 1, "Return the number of messages in a stream.",
         "key:key", complexity="O(1)")
def xlen(ctx: CommandContext, args: list[bytes]) -> Any:
    topic = ctx.engine.find(key_name(args[0]))
    if topic is None:
        return 0
    topic.expire(ctx.engine.now())
    return topic.count


@command("xdel", -3, ["write", "fast"], 1, 1, 1,
         "Removes the specified entries from the stream (a silent delete: no tombstone).",
         "key:key id:string...", complexity="O(1) per entry")
def xdel(ctx: CommandContext, args: list[bytes]) -> Any:
    for a in args[1:]:  # every ID is validated before any delete
        ids.parse_id(a, 0)
    name = key_name(args[0])
    topic = ctx.engine.find(name)
    if topic is None:
        return 0
    seqs = [ids.record_seq(a, topic) for a in args[1:]]
    wanted = sorted({s for s in seqs if s > 0})
    if not wanted:
        return 0
    n, token = ctx.engine.delete_seqs(name, wanted)
    return committed(token, n)


@command("xtrim", -4, ["write"], 1, 1, 1,
         "Trims the stream (a capacity trim: lagging readers get a tombstone).",
         "key:key (MAXLEN|MINID) [(=|~)] threshold:string [LIMIT:count:integer] "
         "[(KEEPREF|DELREF|ACKED)]",
         since="5.0.0", complexity="O(N)")
def xtrim(ctx: CommandContext, args: list[bytes]) -> Any:
    trim = parse_xtrim(args)
    n, token = apply_trim(ctx, key_name(args[0]), trim)
    return committed(token, n)


# ---- XREAD -------------------------------------------------------------------------------


def _find(engine: Any, name: str, waiting: bool) -> Topic | None:
    """The stream `name`; WRONGTYPE for a string, except for a blocked XREAD, which keeps
    waiting while the key holds a string, as redis-server serves only stream keys to it."""
    if waiting and engine.keyspace.owns(name):
        return None
    topic: Topic | None = engine.find(name)
    return topic


def _read_once(ctx: CommandContext, keys: list[bytes], cursors: list[int], count: int,
               nodes: list[str] | None, waiting: bool = False) -> list[list[Any]]:
    engine = ctx.engine
    items: list[list[Any]] = []
    room = replysize.budget(ctx)
    for key, cursor in zip(keys, cursors, strict=True):
        name = key_name(key)
        topic = _find(engine, name, waiting)
        if topic is None:
            continue
        if room <= 0:  # the reply is full: this stream is served by the next read
            break
        result = engine.diff(name, cursor, count or XREAD_ALL, nodes=nodes, fmt=FMT_RESP)
        result = replysize.capped(result, room)
        room -= nbytes(result.records) + len(key)
        item = render_read(topic, key, result)
        if item is not None:
            items.append(item)
    return items


@command("xread", -4, ["readonly", "blocking", "movablekeys"], 0, 0, 0,
         "Returns messages from multiple streams with IDs greater than the ones requested. "
         "Blocks until a message is available otherwise.",
         "[COUNT:count:integer] [BLOCK:milliseconds:integer] [NODE:node:string]... "
         "STREAMS key:key... id:string...")
def xread(ctx: CommandContext, args: list[bytes]) -> Any:
    ra = parse_read_args(args)
    engine = ctx.engine
    cursors = [ids.read_position(engine.find(key_name(k)), i) for k, i in zip(ra.keys, ra.ids, strict=True)]
    items = _read_once(ctx, ra.keys, cursors, ra.count, ra.nodes)
    if items:
        return read_reply(ctx, items)
    if not ra.block:
        return NULL_ARRAY
    return _xread_wait(ctx, ra, cursors)


def _epoch(topic: Topic | None) -> int | None:
    return None if topic is None else topic.epoch


def _xread_wait(ctx: CommandContext, ra: ReadArgs, cursors: list[int]) -> RespBlock:
    """BLOCK: a fan-out Block of the streams read; each change of one of them makes it ready
    and the notifier serves it with the read below (topicsrv/notify/__init__.py Rule 9).
    Readers at the same positions share one read per runner turn (`Notifier.memo`): a write
    that wakes 9,000 readers of `$` reads and renders its entry once (counted as one read)."""
    names = [key_name(k) for k in ra.keys]
    engine = ctx.engine
    epochs = [_epoch(engine.find(n)) for n in names]
    memo = ctx.server.notifier.memo
    shape = (tuple(names), ra.count, tuple(ra.nodes) if ra.nodes else None)

    def attempt() -> Any:
        for i, name in enumerate(names):
            topic = _find(engine, name, True)
            arg = ra.ids[i]
            if arg != b"$" and arg != b"+":
                if topic is not None:  # an ID is compared with the entries there now:
                    cursors[i] = ids.read_position(topic, arg)  # a key created since,
                continue  # or client-chosen IDs appended since that are not past it
            epoch = _epoch(topic)  # a key deleted and created again since the call: all
            if epoch != epochs[i]:  # of the new stream is after `$` (newer IDs, as in Redis)
                epochs[i], cursors[i] = epoch, 0
        key = ("xread", shape, tuple(cursors), ctx.resp3, replysize.budget(ctx))
        reply = memo.get(key)
        if reply is None:
            items = _read_once(ctx, ra.keys, cursors, ra.count, ra.nodes, waiting=True)
            reply = memo[key] = read_reply(ctx, items) if items else NOTHING
        return reply

    return RespBlock(ctx, attempt, topics=names, timeout_s=ra.timeout)


# ---- XINFO STREAM / HELP -----------------------------------------------------------------

container("xinfo", "stream", "A container for stream introspection commands.", "5.0.0")


def _first_last(ctx: CommandContext, topic: Topic) -> tuple[Any, Any]:
    now = ctx.engine.now()
    first = scan_range(topic, 0, topic.head_seq, 1, now, fmt=FMT_RESP)
    last = scan_range(topic, 0, topic.head_seq, 1, now, reverse=True, fmt=FMT_RESP)
    return (Raw(first[0][1]) if first else None), (Raw(last[0][1]) if last else None)


def radix_keys(ctx: CommandContext, topic: Topic) -> int:
    """What Redis's radix-tree-keys would be for this many entries: one listpack node per
    `stream-node-max-entries` (CONFIG SET, default 100; 0 = no limit: one node)."""
    per_node = int(ctx.front.settings.get("stream-node-max-entries", "100"))
    if not topic.count:
        return 0
    return 1 if per_node <= 0 else -(-topic.count // per_node)


def max_deleted_id(topic: Topic) -> bytes:
    """Redis's max-deleted-entry-id: the highest ID removed by XDEL (or TOPIC.DELETE) among the
    slots the topic still holds at/after its capacity front (a trim is not a delete); `0-0`
    when there is none. Slots of a segment that died whole are forgotten."""
    for seg in reversed(topic.segs):
        if seg.next_seq <= topic.front:
            break
        start = max(topic.front - seg.base, 0)
        flags = seg.flags
        if isinstance(flags, bytearray):
            k = flags.rfind(DELETED, start)
            if k >= 0:
                return ids.entry_id(topic, seg.base + k)
        elif len(seg) > start and flags[start] == DELETED:  # a constant run (Const)
            return ids.entry_id(topic, seg.base + len(seg) - 1)
    return b"0-0"


def stream_summary(ctx: CommandContext, topic: Topic) -> dict[str, Any]:
    head = topic.head_seq
    if ids.mapped(topic):
        last_id = b"%d-%d" % topic.last_id
    else:
        last_id = ids.entry_id(topic, head) if topic.segs and head >= topic.front else (
            ids.format_id(topic.last_ts, head) if head >= topic.seq_base else b"0-0")
    earliest = topic.earliest_seq
    first_id = ids.entry_id(topic, earliest) if earliest <= head else b"0-0"
    keys = radix_keys(ctx, topic)
    return {
        "length": topic.count,
        "radix-tree-keys": keys,
        "radix-tree-nodes": keys + 1 if keys else 1,
        "last-generated-id": last_id,
        "max-deleted-entry-id": max_deleted_id(topic),
        "entries-added": entries_added(topic),
        "recorded-first-entry-id": first_id,
        **idmp_fields(ctx, topic),
    }


XINFO_STREAM_SYNTAX = ("ERR unknown subcommand or wrong number of arguments for 'STREAM'. "
                       "Try XINFO HELP.")


@command("xinfo|stream", -3, ["readonly"], 2, 2, 1, "Returns information about a stream.",
         "key:key [FULL [COUNT:count:integer]]")
def xinfo_stream(ctx: CommandContext, args: list[bytes]) -> Any:
    full = False
    count = 10
    rest = args[1:]
    if rest:
        if rest[0].lower() != b"full":
            raise Err(XINFO_STREAM_SYNTAX)
        full = True
        if len(rest) == 3 and rest[1].lower() == b"count":
            count = parse_int(rest[2])
            if count < 0:
                count = 0
        elif len(rest) != 1:
            raise Err(XINFO_STREAM_SYNTAX)
    topic = ctx.engine.find(key_name(args[0]))
    if topic is None:
        raise Err("ERR no such key")
    topic.expire(ctx.engine.now())
    out = stream_summary(ctx, topic)
    if not full:
        out["groups"] = HOOKS["xinfo_stream_groups_count"](ctx, topic)
        out["first-entry"], out["last-entry"] = _first_last(ctx, topic)
        return out
    entries = scan_range(topic, 0, topic.head_seq, count, ctx.engine.now(), fmt=FMT_RESP)
    out["entries"] = Raw(b"*%d\r\n%b" % (len(entries), b"".join([b for _, b in entries])))
    out["groups"] = HOOKS["xinfo_stream_full_groups"](ctx, topic, count)
    return out


XINFO_HELP = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
]


@command("xinfo|help", 2, ["loading", "stale"], 0, 0, 0, "Show helpful text about the different subcommands", "")
def xinfo_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in XINFO_HELP]
