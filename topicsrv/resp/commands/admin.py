"""Server commands that clients, tools and test harnesses send: SHUTDOWN, MEMORY, OBJECT, WAIT,
WAITAOF, LATENCY, SLOWLOG, DEBUG, DUMP/RESTORE, and the CLIENT switches.

Rule 1: each answer is true for one node without replicas, scripts or eviction: WAIT counts 0
replicas, OBJECT ENCODING says `stream`; a command whose purpose we do
not have is refused with an error that says so, never acknowledged with a fake OK that would
mislead (CLIENT TRACKING on, DUMP, RESTORE).
Rule 2: SHUTDOWN stops the server cleanly (as SIGTERM does: fronts stop, the storage flushes
and checkpoints), so every acknowledged write survives, whatever the SAVE/NOSAVE flag says:
the WAL is the database, there is no snapshot to skip. The connection closes without a reply,
as in Redis. While a script runs past busy-reply-threshold, as redis-server 7: only SHUTDOWN
NOSAVE stops the server, and it drops the script whole (none of its writes is kept:
scripting/service.py Rule 6); any other SHUTDOWN answers the BUSY error and changes nothing.
Rule 3: DEBUG answers the safe, read-only subcommands (HELP, OBJECT, SLEEP 0) and refuses the
rest with the text of redis-server 7.0's default `enable-debug-command no`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from topicsrv.engine.keyspace import colls
from topicsrv.engine.keyspace.values import refcount, string_usage
from topicsrv.resp.args import Args
from topicsrv.resp.commands.base import (
    NO_REPLY,
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    container,
    key_name,
    parse_int,
)

log = logging.getLogger("topicsrv.resp")

DEBUG_REFUSED = (
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", "
    "you can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server."
)
DUMP_REFUSED = ("ERR DUMP/RESTORE are not supported: topicsrv has no RDB format; copy a "
                "stream with XRANGE and XADD")


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         since: str = "1.0.0", first: int = 0, group: str = "server") -> Any:
    return command(name, arity, flags, first, first, 1 if first else 0, group, summary, since,
                   syntax=syntax)


def _help(lines: list[str]) -> list[Simple]:
    return [Simple(x) for x in lines]


# ---- SHUTDOWN ----------------------------------------------------------------------------


@_cmd("shutdown", -1, ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"],
      "Synchronously save the dataset to disk and then shut down the server",
      "[(NOSAVE|SAVE)] [NOW] [FORCE] [ABORT]")
def shutdown(ctx: CommandContext, args: list[bytes]) -> Any:
    flags = set()
    for a in args:
        word = a.lower()
        if word not in (b"nosave", b"save", b"now", b"force", b"abort"):
            raise Err(SYNTAX)
        flags.add(word)
    if {b"nosave", b"save"} <= flags or (b"abort" in flags and len(flags) > 1):
        raise Err(SYNTAX)
    if b"abort" in flags:
        raise Err("ERR No shutdown in progress.")
    busy = ctx.server.busy  # a script runs past busy-reply-threshold
    if busy is not None and b"nosave" not in flags:  # Rule 2, as redis-server 7
        raise Err(busy)
    stop = ctx.server.request_shutdown
    if stop is None:
        raise Err("ERR Errors trying to SHUTDOWN. Check logs.")
    log.warning("SHUTDOWN by client %d (%s): stopping cleanly", ctx.client.id, ctx.client.addr)
    if busy is not None:  # none of the script's writes is kept (scripting/service.py Rule 6)
        ctx.server.scripting.discard()
    ctx.client.close_after_reply = True
    stop()
    return NO_REPLY


# ---- MEMORY / OBJECT ---------------------------------------------------------------------

container("memory", "server", "A container for memory diagnostics commands", "4.0.0")

RECORD_OVERHEAD = 48  # per live record: seq/ts/offset slots and index entries (approximate)


@command("memory|usage", -3, ["readonly"], 2, 2, 1, "server",
         "Estimate the memory usage of a key", "4.0.0", syntax="key:key [SAMPLES:count:integer]")
def memory_usage(ctx: CommandContext, args: list[bytes]) -> Any:
    a = Args(args, 1)
    while a:
        if a.option(b"samples"):
            if a.next_int() < 0:
                raise Err(SYNTAX)
        else:
            raise Err(SYNTAX)
    name = key_name(args[0])
    ks = ctx.engine.keyspace
    kind = ks.kind(name)
    if kind == "string":
        return string_usage(name, ks.value(name), ks.encoding(name))
    if kind == "set":
        return colls.usage(ks, name)
    if kind in ("list", "hash", "zset"):
        return colls.usage(ks, name)
    topic = ctx.engine.topics.get(name) if kind else None
    if topic is None:
        return None
    return 256 + len(topic.name) + topic.bytes + RECORD_OVERHEAD * topic.count


@command("memory|help", 2, ["loading", "stale"], 0, 0, 0, "server",
         "Show helpful text about the different subcommands", "4.0.0")
def memory_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return _help([
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP", "    Print this help.",
    ])


container("object", "generic", "A container for object introspection commands", "2.2.3")


def _object(name: str, summary: str) -> Any:
    return command(f"object|{name}", 3, ["readonly"], 2, 2, 1, "generic", summary, "2.2.3",
                   syntax="key:key")


def _kind(ctx: CommandContext, key: bytes) -> tuple[str, str | None]:
    name = key_name(key)
    return name, ctx.engine.keyspace.kind(name)


@_object("encoding", "Inspect the internal encoding of a Redis object")
def object_encoding(ctx: CommandContext, args: list[bytes]) -> Any:
    name, kind = _kind(ctx, args[0])
    if kind is not None and kind != "stream":
        return ctx.engine.keyspace.encoding(name).encode()
    return b"stream" if kind else None


@_object("refcount", "Get the number of references to the value of the key")
def object_refcount(ctx: CommandContext, args: list[bytes]) -> Any:
    name, kind = _kind(ctx, args[0])
    if kind == "string":
        ks = ctx.engine.keyspace
        return refcount(ks.value(name), ks.encoding(name))
    return 1 if kind else None


@_object("idletime", "Get the time since a Redis object was last accessed")
def object_idletime(ctx: CommandContext, args: list[bytes]) -> Any:
    name, kind = _kind(ctx, args[0])
    if kind is not None and kind != "stream":
        return ctx.engine.keyspace.idle_seconds(name)
    topic = ctx.engine.topics.get(name) if kind else None
    if topic is None:
        return None
    last = topic.last_write_ts
    return 0 if last is None else max(0, (int(time.time() * 1000) - last) // 1000)


@_object("freq", "Get the logarithmic access frequency counter of a Redis object")
def object_freq(ctx: CommandContext, args: list[bytes]) -> Any:
    if _kind(ctx, args[0])[1] is None:
        return None
    raise Err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please "
              "note that when switching between policies at runtime LRU and LFU data will take "
              "some time to adjust.")


@command("object|help", 2, ["loading", "stale"], 0, 0, 0, "generic",
         "Show helpful text about the different subcommands", "6.2.0")
def object_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return _help([
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>", "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>", "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>", "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>", "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP", "    Print this help.",
    ])


# ---- WAIT / WAITAOF ----------------------------------------------------------------------


@_cmd("wait", 3, ["noscript"], "Wait for the synchronous replication of all the write commands "
      "sent in the context of the current connection", "numreplicas:integer timeout:integer",
      since="3.0.0", group="generic")
def wait(ctx: CommandContext, args: list[bytes]) -> Any:
    if ctx.server.repl.master is not None:  # before the arguments are parsed, as Redis
        raise Err("ERR WAIT cannot be used with replica instances. Please also note that since "
                  "Redis 4.0 if a replica is configured to be writable (which is not the "
                  "default) writes to replicas are just local and are not propagated.")
    replicas = parse_int(args[0])
    timeout = _timeout(args[1])
    primary = ctx.server.primary
    if replicas <= 0:
        return primary.acked_at(primary.offset)
    # an AckWait: inside EXEC it answers its count at once (dispatch.py Rule 7), as Redis
    return primary.wait(replicas, int(timeout * 1000))  # repl/primary.py Rule 4


@_cmd("waitaof", 4, ["noscript"], "Wait for all write commands sent by the client to be "
      "fsynced to the AOF of the local Redis and/or the replicas",
      "numlocal:integer numreplicas:integer timeout:integer", since="7.2.0", group="generic")
def waitaof(ctx: CommandContext, args: list[bytes]) -> Any:
    numlocal, replicas = parse_int(args[0]), parse_int(args[1])
    timeout = _timeout(args[2])
    local = 1 if ctx.server.config.storage else 0
    if numlocal > 0 and not local:
        raise Err("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
    # every write was answered after its commit (per its topic's durability class): the local
    # count is reached as soon as it is asked; replicas never come
    if replicas <= 0:
        return [local, 0]
    return _no_replica_after(timeout, [local, 0])


def _timeout(raw: bytes) -> float:
    ms = parse_int(raw, "ERR timeout is not an integer or out of range")
    if ms < 0:
        raise Err("ERR timeout is negative")
    return ms / 1000


async def _no_replica_after(seconds: float, reply: Any) -> Any:
    if seconds == 0:  # Redis: wait forever (until the client goes)
        await trio.sleep_forever()
    await trio.sleep(seconds)
    return reply


# ---- LATENCY / SLOWLOG -------------------------------------------------------------------

container("latency", "server", "A container for latency diagnostics commands", "2.8.13")


def _sub(name: str, arity: int, summary: str, syntax: str = "", since: str = "2.8.13") -> Any:
    return command(name, arity, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server",
                   summary, since, syntax=syntax)


@_sub("latency|latest", 2, "Return the latest latency samples for all events")
def latency_latest(ctx: CommandContext, args: list[bytes]) -> Any:
    return []  # latency monitoring is off (latency-monitor-threshold 0), as by default


@_sub("latency|history", 3, "Return timestamp-latency samples for the event", "event:string")
def latency_history(ctx: CommandContext, args: list[bytes]) -> Any:
    return []


@_sub("latency|reset", -2, "Reset latency data for one or more events", "[event:string...]")
def latency_reset(ctx: CommandContext, args: list[bytes]) -> Any:
    return 0


@_sub("latency|doctor", 2, "Return a human readable latency analysis report")
def latency_doctor(ctx: CommandContext, args: list[bytes]) -> Any:
    from topicsrv.resp.commands.base import Verbatim

    return Verbatim("Dave, no latency spike was observed during the lifetime of this Redis "
                    "instance, not in the slightest bit. I honestly think you ought to sleep "
                    "better tonight.\n")


@_sub("latency|help", 2, "Show helpful text about the different subcommands")
def latency_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return _help([
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR", "    Return a human readable latency analysis report.",
        "HISTORY <event>", "    Return time-latency samples for the <event> class.",
        "LATEST", "    Return the latest latency samples for all events.",
        "RESET [<event> ...]", "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HELP", "    Prints this help.",
    ])


container("slowlog", "server", "A container for slow log commands", "2.2.12")


@_sub("slowlog|get", -2, "Get the slow log's entries", "[count:integer]", "2.2.12")
def slowlog_get(ctx: CommandContext, args: list[bytes]) -> Any:
    if args:
        n = parse_int(args[0], "ERR count should be greater than or equal to -1")
        if n < -1:
            raise Err("ERR count should be greater than or equal to -1")
    return []  # no command is logged as slow: the slow log is not recorded


@_sub("slowlog|len", 2, "Get the slow log's length", since="2.2.12")
def slowlog_len(ctx: CommandContext, args: list[bytes]) -> Any:
    return 0


@_sub("slowlog|reset", 2, "Clear all entries from the slow log", since="2.2.12")
def slowlog_reset(ctx: CommandContext, args: list[bytes]) -> Any:
    return Simple("OK")


@_sub("slowlog|help", 2, "Show helpful text about the different subcommands", since="6.2.0")
def slowlog_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return _help([
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]", "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:", "    id, timestamp, time in microseconds, arguments array, "
        "client IP and port,", "    client name",
        "LEN", "    Return the length of the slowlog.",
        "RESET", "    Reset the slowlog.",
        "HELP", "    Prints this help.",
    ])


# ---- DEBUG -------------------------------------------------------------------------------


@_cmd("debug", -2, ["admin", "noscript", "loading", "stale"], "A container for debugging "
      "commands", "subcommand:string [argument:string...]")
def debug(ctx: CommandContext, args: list[bytes]) -> Any:
    sub = args[0].lower()
    if sub == b"help" and len(args) == 1:
        return _help([
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "OBJECT <key>", "    Show low level info about the key and associated value.",
            "SLEEP 0", "    Return at once (a longer sleep would stall the server: refused).",
            "HELP", "    Prints this help.",
        ])
    if sub == b"object" and len(args) == 2:
        topic = ctx.engine.topics.get(key_name(args[1]))
        if topic is None:
            raise Err("ERR no such key")
        idle = object_idletime(ctx, args[1:]) or 0
        return Simple(f"Value at:0x{id(topic):x} refcount:1 encoding:stream "
                      f"serializedlength:{topic.bytes} lru:0 lru_seconds_idle:{idle}")
    if sub == b"sleep" and len(args) == 2 and args[1] in (b"0", b"0.0"):
        return Simple("OK")
    raise Err(DEBUG_REFUSED)


# ---- DUMP / RESTORE (refused) ------------------------------------------------------------


@_cmd("dump", 2, ["readonly"], "Return a serialized version of the value stored at the "
      "specified key (topicsrv: refused)", "key:key", since="2.6.0", first=1, group="generic")
def dump(ctx: CommandContext, args: list[bytes]) -> Any:
    raise Err(DUMP_REFUSED)


@_cmd("restore", -4, ["write", "denyoom"], "Create a key using the provided serialized value "
      "(topicsrv: refused)", "key:key ttl:integer serialized-value:string [REPLACE] [ABSTTL] "
      "[IDLETIME:seconds:integer] [FREQ:frequency:integer]", since="2.6.0", first=1,
      group="generic")
def restore(ctx: CommandContext, args: list[bytes]) -> Any:
    raise Err(DUMP_REFUSED)
