"""Server commands: COMMAND [COUNT|DOCS|INFO] (GETKEYS and LIST: getkeys.py), CONFIG GET|SET|RESETSTAT, DBSIZE,
TIME, FLUSHDB, FLUSHALL (INFO is info.py, the other server commands admin.py).

Rule 1: COMMAND INFO/DOCS come from the registry (base.REGISTRY, argument docs from each
command's `syntax`), so a new command is documented to redis-cli by registering it.
Rule 2: CONFIG GET answers what clients and redis-benchmark ask (`save`, `appendonly`, ...)
from our config, an empty result for names we do not have; CONFIG SET changes only SETTERS
(`maxmemory`, `timeout`, the stream node sizes), anything else we know is immutable.
Rule 3: FLUSHDB/FLUSHALL delete every topic (each awaited like DEL) - there is one db.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from topicsrv.bus.keyspace import flags_text, parse_flags
from topicsrv.engine.glob import PatternTooLong, compile_glob
from topicsrv.memory import parse_size
from topicsrv.resp.acl import categories
from topicsrv.resp.commands import replication
from topicsrv.resp.commands.base import (
    ERROR_STATS,
    REGISTRY,
    SYNTAX,
    CommandContext,
    CommandSpec,
    Err,
    Simple,
    command,
    container,
    parse_int_config,
    wrong_args,
)
from topicsrv.resp.commands.getkeys import key_specs, spec_reply
from topicsrv.resp.commands.keyspecs import TIPS


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         since: str = "1.0.0") -> Any:
    return command(name, arity, flags, 0, 0, 0, "server", summary, since, syntax=syntax)


# ---- COMMAND -----------------------------------------------------------------------------

def _key_specs(spec: CommandSpec) -> list[dict[str, Any]]:
    """The generic RO/RW spec, Redis's own flags (keyspecs.py; one spec per key when it lists
    several), or a movable command's keyword/keynum spec (getkeys.py)."""
    return [spec_reply(ks) for ks in key_specs(spec)]


def command_info(spec: CommandSpec) -> list[Any]:
    cats = categories(spec)
    return [
        spec.name, spec.arity, {Simple(f) for f in spec.flags}, spec.first_key, spec.last_key,
        spec.step, {Simple(c) for c in cats}, set(TIPS.get(spec.name, ())),
        _key_specs(spec), [command_info(s) for s in spec.subcommands.values()],
    ]


def _docs(spec: CommandSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": spec.summary, "since": spec.since, "group": spec.group}
    if spec.complexity:
        out["complexity"] = spec.complexity
    if spec.doc_flags:
        out["doc_flags"] = {Simple(f) for f in spec.doc_flags}
    if spec.arguments:
        out["arguments"] = [_arg_doc(a) for a in spec.arguments]
    if spec.subcommands:
        out["subcommands"] = {s.name: _docs(s) for s in spec.subcommands.values()}
    return out


def _arg_doc(arg: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in arg.items():
        if k == "arguments":
            out[k] = [_arg_doc(a) for a in v]
        elif k == "flags":
            out[k] = [Simple(f) for f in v]
        else:
            out[k] = v
    return out


container("command", "server", "Get array of Redis command details", "2.8.13")


@_cmd("command", -1, ["loading", "stale"], "Get array of Redis command details", since="2.8.13")
def command_all(ctx: CommandContext, args: list[bytes]) -> Any:
    return [command_info(s) for s in REGISTRY.values()]


def _sub(name: str, arity: int, summary: str, syntax: str = "") -> Any:
    return command(f"command|{name}", arity, ["loading", "stale"], 0, 0, 0, "server", summary,
                   "2.8.13", syntax=syntax)


def _find(name: bytes) -> CommandSpec | None:
    text = name.decode("latin-1").lower()
    parent, _, sub = text.partition("|")
    spec = REGISTRY.get(parent)
    if spec is not None and sub:
        return spec.subcommands.get(text)
    return spec


@_sub("count", 2, "Get total number of Redis commands")
def command_count(ctx: CommandContext, args: list[bytes]) -> Any:
    return len(REGISTRY)


@_sub("info", -2, "Get array of specific Redis command details, or all when no argument is given",
      "[command-name:string...]")
def command_info_cmd(ctx: CommandContext, args: list[bytes]) -> Any:
    if not args:
        return [command_info(s) for s in REGISTRY.values()]
    out: list[Any] = []
    for a in args:
        spec = _find(a)
        out.append(None if spec is None else command_info(spec))
    return out


@_sub("docs", -2, "Get array of specific Redis command documentation", "[command-name:string...]")
def command_docs(ctx: CommandContext, args: list[bytes]) -> Any:
    specs = list(REGISTRY.values()) if not args else [s for s in map(_find, args) if s is not None]
    return {s.name: _docs(s) for s in specs}


@_sub("help", 2, "Show helpful text about the different subcommands")
def command_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(x) for x in (
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)", "    Return details about all Redis commands.",
        "COUNT", "    Return the total number of commands in this Redis server.",
        "LIST", "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]", "    Return details about multiple Redis commands.",
        "DOCS [<command-name> ...]", "    Return documentation details about multiple Redis commands.",
        "GETKEYS <full-command>", "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP", "    Prints this help.",
    )]


# ---- CONFIG ------------------------------------------------------------------------------

container("config", "server", "A container for server configuration commands", "2.0.0")


def config_values(ctx: CommandContext) -> dict[str, str]:
    cfg = ctx.server.config
    return {
        "bind": cfg.bind, "port": str(ctx.front.port),
        "protected-mode": "yes" if cfg.protected_mode else "no",
        "requirepass": cfg.requirepass or "", "databases": "1", "save": "",
        "appendonly": "yes" if cfg.storage else "no", "appendfsync": "everysec",
        "maxmemory": str(ctx.server.memory.limit), "maxmemory-policy": "noeviction",
        "maxclients": str(ctx.server.admission.maxclients),
        "timeout": "0", "tcp-keepalive": "300",  # timeout: CONFIG SET (resp/server.py Rule 5)
        "proto-max-bulk-len": str(cfg.proto_max_bulk_len),
        "client-query-buffer-limit": str(1 << 30),
        "client-output-buffer-limit":
            f"normal {cfg.client_output_limit} {cfg.client_output_limit} 0 "
            f"slave 268435456 67108864 60 {ctx.server.bus.limits.render()}",
        "stream-node-max-bytes": "4096", "stream-node-max-entries": "100",
        "list-compress-depth": "0",
        "dir": str(cfg.data_dir), "io-threads": "1", "cluster-enabled": "no",
        "notify-keyspace-events": flags_text(ctx.server.bus.keyspace.flags), "lua-time-limit": "5000", "busy-reply-threshold": "5000",
        "slowlog-log-slower-than": "10000", "slowlog-max-len": "128",
        "latency-monitor-threshold": "0", "latency-tracking": "no", "enable-debug-command": "no",
        **replication.settings(ctx),
        "aof-use-rdb-preamble": "no", "cluster-node-timeout": "15000", "hz": "10",
        "lfu-log-factor": "10", "lfu-decay-time": "1", "maxmemory-clients": "0",
        **_encodings(ctx),
        **ctx.front.settings,
    }


# the keyspace's encoding limits, with Redis 7's old names as aliases
ENCODING_SETTINGS: dict[str, str] = {
    "list-max-listpack-size": "list_fill", "list-max-ziplist-size": "list_fill",
    "hash-max-listpack-entries": "hash_entries", "hash-max-ziplist-entries": "hash_entries",
    "hash-max-listpack-value": "hash_value", "hash-max-ziplist-value": "hash_value",
}
# sorted sets (zsetvalue.py Rule 3), Redis 7's names and their old aliases
ENCODING_SETTINGS.update({
    "zset-max-listpack-entries": "zset_entries", "zset-max-ziplist-entries": "zset_entries",
    "zset-max-listpack-value": "zset_value", "zset-max-ziplist-value": "zset_value",
})
# sets (setvalue.py Rule 2): Redis 7.0's intset limit, and Redis 7.2's listpack ones
ENCODING_SETTINGS.update({"set-max-intset-entries": "set_intset",
                          "set-max-listpack-entries": "set_entries",
                          "set-max-listpack-value": "set_value"})


def _encodings(ctx: CommandContext) -> dict[str, str]:
    ks = ctx.engine.keyspace
    return {name: str(getattr(ks, attr)) for name, attr in ENCODING_SETTINGS.items()}


def _parse_int_setting(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError("argument couldn't be parsed into an integer") from None
    if not -(1 << 31) <= n < 1 << 31:
        raise ValueError("argument must be between -2147483648 and 2147483647 inclusive")
    return n


def _set_encoding(name: str) -> Callable[[CommandContext, int], None]:
    def apply(ctx: CommandContext, value: int) -> None:
        setattr(ctx.engine.keyspace, ENCODING_SETTINGS[name], value)
    return apply


@command("config|get", -3, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server",
         "Get the values of configuration parameters", "2.0.0", syntax="parameter:string...")
def config_get(ctx: CommandContext, args: list[bytes]) -> Any:
    values = config_values(ctx)
    out: dict[str, str] = {}
    for a in args:
        try:
            match = compile_glob(a.lower()).match  # Redis: stringmatch(pattern, name, nocase=1)
        except PatternTooLong as e:
            raise Err(f"ERR {e}") from None
        for k, v in values.items():
            if match(k.encode("latin-1")):
                out[k] = v
    return out


def _parse_memory(value: str) -> int:
    size = parse_size(value)
    if size is None:
        raise ValueError("argument must be a memory value")
    return size


def _set_maxmemory(ctx: CommandContext, size: int) -> None:
    ctx.server.memory.limit = size


def parse_count(value: str) -> int:
    """A CONFIG SET value that is a count or a duration in ms: 0 .. 2^63-1 (Redis's texts)."""
    try:
        n = int(value)
    except ValueError:
        raise ValueError("argument couldn't be parsed into an integer") from None
    if not 0 <= n < 1 << 63:
        raise ValueError("argument must be between 0 and 9223372036854775807 inclusive")
    return n


def _remember(name: str) -> Callable[[CommandContext, Any], None]:
    """A setting kept in `front.settings`, reported back by CONFIG GET. The stream node sizes
    (Redis sizes its radix-tree nodes with them; topicsrv stores records in segments of its
    own) are nothing more; `timeout` is read by the idle-client sweep (resp/server.py)."""
    def apply(ctx: CommandContext, value: int) -> None:
        ctx.front.settings[name] = str(value)
    return apply


def _set_notify(ctx: CommandContext, flags: int) -> None:
    ctx.server.bus.keyspace.flags = flags


def _parse_buffer_limits(value: str) -> list[tuple[str, int, int, int]]:
    """`<class> <hard> <soft> <soft-seconds>`..., as Redis; only `pubsub` may change here
    (`normal` is --client-output-limit; there are no replicas)."""
    words = value.split()
    if not words or len(words) % 4:
        raise ValueError("Wrong number of arguments in buffer limit configuration.")
    out = []
    for i in range(0, len(words), 4):
        klass = words[i].lower()
        if klass not in ("normal", "slave", "replica", "pubsub"):
            raise ValueError("Invalid client class specified in buffer limit configuration.")
        hard, soft = parse_size(words[i + 1]), parse_size(words[i + 2])
        try:
            secs = int(words[i + 3])
        except ValueError:
            secs = -1
        if hard is None or soft is None or secs < 0:
            raise ValueError("Error in hard, soft or soft_seconds setting in buffer limit "
                             "configuration.")
        out.append((klass, hard, soft, secs))
    return out


def _set_buffer_limits(ctx: CommandContext, limits: list[tuple[str, int, int, int]]) -> None:
    for klass, hard, soft, secs in limits:
        if klass == "pubsub":
            lim = ctx.server.bus.limits
            lim.hard, lim.soft, lim.soft_seconds = hard, soft, secs


# CONFIG SET parameters that can change at run time (name -> parse, apply); everything else
# is set on the command line
SETTERS: dict[str, tuple[Callable[[str], Any], Callable[[CommandContext, Any], None]]] = {
    "maxmemory": (_parse_memory, _set_maxmemory),
    "stream-node-max-bytes": (_parse_memory, _remember("stream-node-max-bytes")),
    "stream-node-max-entries": (parse_count, _remember("stream-node-max-entries")),
    "timeout": (parse_int_config, _remember("timeout")),  # idle clients closed: resp/server.py
    "notify-keyspace-events": (parse_flags, _set_notify),  # topicsrv/bus/keyspace.py
    "client-output-buffer-limit": (_parse_buffer_limits, _set_buffer_limits),  # pubsub only
    **{name: (_parse_int_setting, _set_encoding(name)) for name in ENCODING_SETTINGS},
    # Redis 7.0's types: the hash entries a size_t count, the hash value a memory size
    **{name: (parse_count, _set_encoding(name))
       for name in ("hash-max-listpack-entries", "hash-max-ziplist-entries")},
    **{name: (_parse_memory, _set_encoding(name))
       for name in ("hash-max-listpack-value", "hash-max-ziplist-value")},
    # the sorted-set limits: the same types as the hash ones (Redis 7.0's config.c)
    **{name: (parse_count, _set_encoding(name))
       for name in ("zset-max-listpack-entries", "zset-max-ziplist-entries")},
    **{name: (_parse_memory, _set_encoding(name))
       for name in ("zset-max-listpack-value", "zset-max-ziplist-value")},
    # the set limits are size_t counts, the listpack value a memory size (Redis 7.2)
    **{name: (parse_count, _set_encoding(name))
       for name in ("set-max-intset-entries", "set-max-listpack-entries")},
    "set-max-listpack-value": (_parse_memory, _set_encoding("set-max-listpack-value")),
    # accepted and reported, with no effect: there are no RDB snapshots to schedule (the WAL
    # and the checkpoint are the database) and list nodes are not compressed
    "save": (str, _remember("save")),
    "list-compress-depth": (parse_count, _remember("list-compress-depth")),
    **replication.SETTERS,  # replica-priority, min-replicas-*, repl-backlog-size, masterauth
}


@command("config|set", -4, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server",
         "Set configuration parameters (topicsrv: maxmemory, timeout, "
         "stream-node-max-bytes|entries; the "
         "rest is set on the command line)", "2.0.0", syntax="(parameter:string value:string)...")
def config_set(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) % 2:
        raise wrong_args("config|set")
    known = config_values(ctx)
    parsed: list[tuple[str, Any]] = []
    for i in range(0, len(args), 2):  # parse every pair first: a CONFIG SET applies all or none
        name, value = args[i].decode("latin-1"), args[i + 1].decode("latin-1")
        setter = SETTERS.get(name.lower())
        if setter is None:
            if name.lower() in known:
                raise Err(f"ERR CONFIG SET failed (possibly related to argument '{name}') - "
                          "can't set immutable config")
            raise Err(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
        try:
            parsed.append((name.lower(), setter[0](value)))
        except ValueError as e:
            raise Err(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {e}") \
                from None
    for name, value in parsed:
        SETTERS[name][1](ctx, value)
    return Simple("OK")


@command("config|resetstat", 2, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server",
         "Reset the stats returned by INFO", "2.0.0")
def config_resetstat(ctx: CommandContext, args: list[bytes]) -> Any:
    st = ctx.front.stats
    st.total_commands = st.net_input_bytes = st.net_output_bytes = 0
    st.keyspace_hits = st.keyspace_misses = st.rejected_connections = 0
    ERROR_STATS.clear()
    ctx.front.cmdstats.clear()
    return Simple("OK")


# ---- misc --------------------------------------------------------------------------------


@_cmd("dbsize", 1, ["readonly", "fast"], "Return the number of keys in the selected database")
def dbsize(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.engine.keyspace.size()


@_cmd("time", 1, ["loading", "stale", "fast"], "Return the current server time", since="2.6.0")
def time_(ctx: CommandContext, args: list[bytes]) -> Any:
    now_us = time.time_ns() // 1000
    return [str(now_us // 1_000_000).encode(), str(now_us % 1_000_000).encode()]


async def _flush_all(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1 or (args and args[0].lower() not in (b"async", b"sync")):
        raise Err(SYNTAX)
    engine = ctx.engine
    engine.journal.check_writable(None)
    tokens = [engine.keyspace.commit([("f",)])]
    for name in list(engine.topics):
        _, token = engine.delete_topic(name)
        if token is not None:
            tokens.append(token)
    for token in tokens:
        if token is not None:
            await token.wait()
    return Simple("OK")


@_cmd("flushdb", -1, ["write"], "Remove all keys from the current database",
      "[(ASYNC|SYNC)]")
async def flushdb(ctx: CommandContext, args: list[bytes]) -> Any:
    return await _flush_all(ctx, args)


@_cmd("flushall", -1, ["write"], "Remove all keys from all databases", "[(ASYNC|SYNC)]")
async def flushall(ctx: CommandContext, args: list[bytes]) -> Any:
    return await _flush_all(ctx, args)
