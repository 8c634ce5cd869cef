"""Replication commands: REPLICAOF/SLAVEOF, ROLE, REPLCONF, PSYNC, CONFIG REWRITE, and INFO's
replication section (topicsrv/repl/; docs/replication.md).

Rule 1 (Redis's replies): `REPLICAOF host port` answers `OK` (`OK Already connected to
specified master` when it already follows it), `REPLICAOF NO ONE` promotes; ROLE, INFO
replication and the errors are redis-server 7.0's, field for field, because Redis Sentinel and
clients parse them (sentinel.c reads role, master_host, master_port, master_link_status,
master_link_down_since_seconds, slave_priority, slave_repl_offset, replica_announced, run_id
and the `slaveN:ip=,port=,state=,offset=,lag=` lines).
Rule 2 (Sentinel's failover transaction): `MULTI; SLAVEOF ...; CONFIG REWRITE; CLIENT KILL
TYPE normal; CLIENT KILL TYPE pubsub; EXEC` queues whole and runs: none of these is refused
while queuing.
Rule 3 (PSYNC is topicsrv's): only a topicsrv replica (it says `REPLCONF capa topicsrv`)
can sync; a redis-server replica gets an error saying so instead of a payload it cannot read.
Rule 4 (CONFIG REWRITE): persists the role and the primary's address (replication.json,
repl/state.py Rule 3), so a restarted server comes back in the role it was last given.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from topicsrv.engine import restore
from topicsrv.engine.log import failover
from topicsrv.memory import parse_size
from topicsrv.repl import wire
from topicsrv.repl.state import new_id
from topicsrv.resp.commands.base import (
    NO_REPLY,
    SYNTAX,
    CommandContext,
    Err,
    Simple,
    command,
    parse_int,
    parse_int_config,
)
from topicsrv.storage import replsync

log = logging.getLogger("topicsrv.repl")

READONLY = "READONLY You can't write against a read only replica."
NOREPLICAS = "NOREPLICAS Not enough good replicas to write."


def _cmd(name: str, arity: int, flags: list[str], summary: str, syntax: str = "",
         since: str = "5.0.0") -> Any:
    return command(name, arity, flags, 0, 0, 0, "server", summary, since, syntax=syntax)


def changed(ctx: CommandContext) -> None:
    """Wake the link task: the role or the primary changed (tasks/replica.py)."""
    state = ctx.server.repl
    if state.link_scope is not None:
        state.link_scope.cancel()
    if state.changed is not None:
        state.changed.set()
        state.changed = trio.Event()


def become_replica(ctx: CommandContext, host: str, port: int) -> None:
    server = ctx.server
    state = server.repl
    primary = server.primary
    if state.master is None:  # a primary steps down: it resumes its own history if it can
        state.resume = (state.replid, primary.offset)
        primary.detach(server.storage)
    else:
        state.resume = (state.replid, state.offset)
    state.master = (host, port)
    state.link_up = False
    state.link_down_since = time.monotonic()
    state.state = "connect"
    server.engine.keyspace.passive = True
    log.info("following %s:%d as a replica (REPLICAOF)", host, port)
    changed(ctx)


def become_primary(ctx: CommandContext) -> None:
    server = ctx.server
    state = server.repl
    if state.master is None:
        return
    state.replid2, state.second_offset = state.replid, state.offset  # repl/state.py Rule 2
    state.replid = new_id()
    state.master = None
    state.link_up = False
    state.resume = None
    server.engine.keyspace.passive = False
    server.primary.attach(server.storage)
    engine = server.engine
    for topic in list(engine.topics.values()):  # engine/log/failover.py Rule 1
        first = topic.next_seq
        restore.open_failover_gap(topic, first, failover.MARGIN)
        engine.journal.failover_gap(topic, first, failover.MARGIN)
        engine.notify(topic.name)
    log.info("promoted to primary (REPLICAOF NO ONE) at offset %d; new replid %s",
             state.offset, state.replid)
    changed(ctx)


def _replicaof(ctx: CommandContext, args: list[bytes]) -> Any:
    if ctx.client.repl is not None:
        raise Err("ERR Command is not valid when client is a replica.")
    state = ctx.server.repl
    if args[0].lower() == b"no" and args[1].lower() == b"one":
        if state.master is not None:
            become_primary(ctx)
            _save(ctx)
        return Simple("OK")
    try:  # Redis: getRangeLongFromObjectOrReply(0, 65535, "Invalid master port")
        port = parse_int(args[1])
    except Err:
        port = -1
    if not 0 <= port < 65536:
        raise Err("ERR Invalid master port")
    host = args[0].decode("utf-8", "replace")
    if state.master is not None and state.master[0].lower() == host.lower() and \
            state.master[1] == port:  # Redis: strcasecmp on the host
        return Simple("OK Already connected to specified master")
    become_replica(ctx, host, port)
    _save(ctx)
    return Simple("OK")


def _save(ctx: CommandContext) -> None:
    try:
        ctx.server.repl.save()
    except OSError as exc:
        log.error("replication.json not written: %s", exc)


_FLAGS = ["admin", "noscript", "stale", "no_async_loading"]


@_cmd("replicaof", 3, _FLAGS, "Configure a server as replica of another, or promote it to a "
      "master", "host:string port:integer")
def replicaof(ctx: CommandContext, args: list[bytes]) -> Any:
    return _replicaof(ctx, args)


@_cmd("slaveof", 3, _FLAGS, "Sets a Redis server as a replica of another, or promotes it to "
      "being a master", "host:string port:integer", since="1.0.0")
def slaveof(ctx: CommandContext, args: list[bytes]) -> Any:
    return _replicaof(ctx, args)


@_cmd("role", 1, ["noscript", "loading", "stale", "fast"], "Returns the replication role",
      since="2.8.12")
def role(ctx: CommandContext, args: list[bytes]) -> Any:
    state = ctx.server.repl
    if state.master is not None:
        return ["slave", state.master[0], state.master[1], state.state, state.offset]
    primary = ctx.server.primary
    return ["master", primary.offset,
            [[link.ip, str(link.port), str(link.ack)] for link in primary.links]]


@_cmd("replconf", -1, ["admin", "noscript", "loading", "stale", "allow_busy"],
      "An internal command for configuring the replication stream", since="3.0.0")
def replconf(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) % 2:
        raise Err(SYNTAX)
    primary = ctx.server.primary
    link = ctx.client.repl
    hs = primary.handshakes.setdefault(ctx.client.id, {})
    for i in range(0, len(args), 2):
        opt, val = args[i].lower(), args[i + 1]
        if opt == b"ack":
            if link is not None:
                primary.ack(link, parse_int(val))
            return NO_REPLY
        if opt == b"getack":
            return NO_REPLY  # only a primary sends it, to its replicas
        if opt == b"listening-port":
            port = parse_int(val)
            if not 0 <= port < 65536:
                raise Err("ERR Invalid listening port")
            hs["port"] = port
        elif opt == b"ip-address":
            hs["ip"] = val.decode("utf-8", "replace")
        elif opt == b"capa":
            hs.setdefault("capa", set()).add(val.lower())
        elif opt in (b"rdb-only", b"rdb-filter-only"):
            pass
        else:
            raise Err(f"ERR Unrecognized REPLCONF option: {args[i].decode('utf-8', 'replace')}")
    return Simple("OK")


@_cmd("sync", 1, ["admin", "noscript", "no_async_loading", "no_multi"],
      "Internal command used for replication", since="1.0.0")
def sync(ctx: CommandContext, args: list[bytes]) -> Any:
    raise Err("ERR topicsrv feeds topicsrv replicas only (PSYNC after REPLCONF capa topicsrv): "
              "a redis-server replica cannot read its journal")


@_cmd("psync", -3, ["admin", "noscript", "no_async_loading", "no_multi"],
      "An internal command used in replication", "replicationid:string offset:integer",
      since="2.8.0")
async def psync(ctx: CommandContext, args: list[bytes]) -> Any:
    server = ctx.server
    primary = server.primary
    client = ctx.client
    hs = primary.handshakes.get(client.id, {})
    if b"topicsrv" not in hs.get("capa", set()):
        raise Err("ERR topicsrv feeds topicsrv replicas only (PSYNC after REPLCONF capa "
                  "topicsrv): a redis-server replica cannot read its journal")
    if server.repl.master is not None:
        raise Err("ERR this server is a replica; chained replication is not supported: "
                  "point the replica at the primary")
    if client.repl is not None:
        raise Err("ERR this connection is already a replica's link")
    replid = args[0].decode("latin-1")
    off = parse_int(args[1])
    storage = server.storage
    ip = hs.get("ip") or client.addr.rsplit(":", 1)[0]
    port = int(hs.get("port", 0))
    backlog = primary.attach(storage)
    if primary.can_resume(replid, off):
        data = backlog.since(off) or b""
        primary.link(client, ip, port, off, b"+CONTINUE %s\r\n%s" % (server.repl.replid.encode(), data))
        primary.partial_syncs += 1
        log.info("replica %s:%d resumes at offset %d (%d bytes from the backlog)", ip, port, off,
                 len(data))
        return NO_REPLY  # repl/primary.py `link` sent it
    if storage is None:
        raise Err("ERR a primary started with --no-storage cannot feed a full sync")
    if replid != "?":
        primary.partial_refused += 1
    log.info("replica %s:%d needs a full sync (asked %s %d)", ip, port, replid, off)
    cut, files = await storage.checkpoint(
        capture=lambda: replsync.read_files(storage.data_dir, storage.cold_dir))
    payload = wire.pack_files(files)
    rest = backlog.since(cut)
    if rest is None:
        raise Err("ERR the backlog lost the checkpoint's cut while it was written; retry "
                  "(raise repl-backlog-size)")
    primary.link(client, ip, port, cut, b"+FULLRESYNC %s %d\r\n$%d\r\n%s%s" % (
        server.repl.replid.encode(), cut, len(payload), payload, rest))
    primary.full_syncs += 1
    log.info("replica %s:%d: full sync of %d files, %d bytes, at offset %d", ip, port, len(files),
             len(payload), cut)
    return NO_REPLY  # repl/primary.py `link` sent it


@command("config|rewrite", 2, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server",
         "Rewrite the configuration file with the in memory configuration (topicsrv: the "
         "replication role and primary, replication.json)", "2.8.0")
def config_rewrite(ctx: CommandContext, args: list[bytes]) -> Any:
    if ctx.server.repl.data_dir is None:
        raise Err("ERR The server is running without a config file")
    try:
        ctx.server.repl.save()
    except OSError as exc:
        raise Err(f"ERR Rewriting config file: {exc}") from None
    return Simple("OK")


def replication_section(ctx: CommandContext) -> list[tuple[str, Any]]:
    """INFO replication, as redis-server 7.0 (Rule 1)."""
    server = ctx.server
    state = server.repl
    primary = server.primary
    out: list[tuple[str, Any]] = []
    if state.master is None:
        out += [("role", "master"), ("connected_slaves", len(primary.links))]
        if state.min_replicas_to_write:
            out.append(("min_slaves_good_slaves", primary.good()))
        for i, link in enumerate(primary.links):
            out.append((f"slave{i}", f"ip={link.ip},port={link.port},state=online,"
                                     f"offset={link.ack},lag={link.lag()}"))
        offset = primary.offset
    else:
        now = time.monotonic()
        out += [("role", "slave"), ("master_host", state.master[0]),
                ("master_port", state.master[1]),
                ("master_link_status", "up" if state.link_up else "down"),
                ("master_last_io_seconds_ago", int(now - state.last_io) if state.link_up else -1),
                ("master_sync_in_progress", 1 if state.state == "sync" else 0),
                ("slave_read_repl_offset", state.offset), ("slave_repl_offset", state.offset)]
        if not state.link_up:
            out.append(("master_link_down_since_seconds", int(now - state.link_down_since)))
        out += [("slave_priority", state.priority), ("slave_read_only", 1),
                ("replica_announced", 1 if state.announce else 0),
                ("connected_slaves", len(primary.links))]
        offset = state.offset
    backlog = primary.backlog
    out += [("master_failover_state", "no-failover"), ("master_replid", state.replid),
            ("master_replid2", state.replid2), ("master_repl_offset", offset),
            # Redis shows the first byte the previous replid does not cover (shiftReplicationId)
            ("second_repl_offset", state.second_offset + 1 if state.second_offset >= 0 else -1),
            ("repl_backlog_active", 1 if backlog is not None else 0),
            ("repl_backlog_size", state.backlog_size),
            ("repl_backlog_first_byte_offset", backlog.first + 1 if backlog is not None else 0),
            ("repl_backlog_histlen", backlog.histlen() if backlog is not None else 0)]
    return out


def _yes_no(value: str) -> bool:
    if value.lower() not in ("yes", "no"):
        raise ValueError("argument must be 'yes' or 'no'")
    return value.lower() == "yes"


def _memory(value: str) -> int:
    """repl-backlog-size: a memory value (`1mb`), 1 .. LLONG_MAX, as Redis 7.0."""
    size = parse_size(value)
    if size is None:
        raise ValueError("argument must be a memory value")
    if not 1 <= size < 1 << 63:
        raise ValueError("argument must be between 1 and 9223372036854775807 inclusive")
    return size


def _set(attr: str) -> Any:
    def apply(ctx: CommandContext, value: Any) -> None:
        setattr(ctx.server.repl, attr, value)
    return apply


def _set_backlog(ctx: CommandContext, size: int) -> None:
    ctx.server.repl.backlog_size = size
    backlog = ctx.server.primary.backlog
    if backlog is not None:
        backlog.size = max(size, 16 << 10)


def settings(ctx: CommandContext) -> dict[str, str]:
    """CONFIG GET's view of the replication settings."""
    state = ctx.server.repl
    return {
        "replicaof": f"{state.master[0]} {state.master[1]}" if state.master else "",
        "slaveof": f"{state.master[0]} {state.master[1]}" if state.master else "",
        "replica-priority": str(state.priority), "slave-priority": str(state.priority),
        "replica-announced": "yes" if state.announce else "no",  # no slave- alias in Redis 7.0
        "replica-read-only": "yes", "slave-read-only": "yes",
        "min-replicas-to-write": str(state.min_replicas_to_write),
        "min-slaves-to-write": str(state.min_replicas_to_write),
        "min-replicas-max-lag": str(state.min_replicas_max_lag),
        "min-slaves-max-lag": str(state.min_replicas_max_lag),
        "min-replicas-to-ack": str(state.min_replicas_to_ack),  # topicsrv's (primary.py Rule 6)
        "repl-backlog-size": str(state.backlog_size),
        "masteruser": state.masteruser or "", "masterauth": state.masterauth or "",
    }


SETTERS: dict[str, tuple[Any, Any]] = {
    **{n: (parse_int_config, _set("priority")) for n in ("replica-priority", "slave-priority")},
    "replica-announced": (_yes_no, _set("announce")),
    **{n: (parse_int_config, _set("min_replicas_to_write"))
       for n in ("min-replicas-to-write", "min-slaves-to-write")},
    **{n: (parse_int_config, _set("min_replicas_max_lag"))
       for n in ("min-replicas-max-lag", "min-slaves-max-lag")},
    "min-replicas-to-ack": (parse_int_config, _set("min_replicas_to_ack")),
    "repl-backlog-size": (_memory, _set_backlog),
    "masteruser": (str, _set("masteruser")),
    "masterauth": (str, _set("masterauth")),
}


def write_refusal(ctx: CommandContext) -> str | None:
    """The error a write gets on this server now: READONLY on a replica, NOREPLICAS past
    min-replicas-to-write (repl/primary.py Rule 5); None when it may run."""
    server = ctx.server
    state = server.repl
    if state.master is not None:
        return READONLY
    if state.min_replicas_to_write and server.primary.good() < state.min_replicas_to_write:
        return NOREPLICAS
    return None
