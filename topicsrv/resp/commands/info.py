"""INFO [section ...]: the sections and field names of Redis 7.

Rule 1: sections come out in Redis's order, each as `# Header` (`# CPU`, `# Errorstats`, ...)
followed by `field:value` lines; `INFO` alone and `default` give the default sections,
`all` adds `commandstats` and `latencystats`, `everything` adds `modules` too (we have none);
several names give each named section once, in Redis's order; an unknown name gives nothing.
Rule 2: fields a client or test harness probes are present with values that are true for a
single node without replication or cluster (`role:master`, `cluster_enabled:0`,
`connected_slaves:0`); topicsrv's own counters follow Redis's in the same section.
Rule 3: `errorstats` counts error replies by their first word (`errorstat_ERR:count=N`),
process-wide (base.ERROR_STATS); `CONFIG RESETSTAT` clears it.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from typing import Any

from topicsrv import __version__ as topicsrv_version
from topicsrv import buildinfo
from topicsrv.memory import rss_bytes
from topicsrv.resp.commands.base import ERROR_STATS, CommandContext, Verbatim, command
from topicsrv.resp.commands.connection import REDIS_VERSION
from topicsrv.resp.commands.persistence import persistence_section
from topicsrv.resp.commands.replication import replication_section

Section = list[tuple[str, Any]]

# (name, header) in Redis 7's order
SECTIONS = (
    ("server", "Server"), ("clients", "Clients"), ("memory", "Memory"),
    ("persistence", "Persistence"), ("stats", "Stats"), ("replication", "Replication"),
    ("cpu", "CPU"), ("modules", "Modules"), ("commandstats", "Commandstats"),
    ("errorstats", "Errorstats"), ("latencystats", "Latencystats"), ("cluster", "Cluster"),
    ("keyspace", "Keyspace"),
)
DEFAULT = frozenset({"server", "clients", "memory", "persistence", "stats", "replication", "cpu",
                     "modules", "errorstats", "cluster", "keyspace"})
ALL = DEFAULT | {"commandstats", "latencystats"}


def human(n: float) -> str:
    """Redis's bytesToHuman: `512B`, `1.50K`, `2.00M`, `1.00G`."""
    for unit in ("B", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return f"{int(n)}B" if unit == "B" else f"{n:.2f}{unit}"
        n /= 1024
    return str(n)


def _server(ctx: CommandContext) -> Section:
    uptime = int(time.time() - ctx.server.started_at)
    return [
        ("redis_version", REDIS_VERSION), ("topicsrv_version", topicsrv_version),
        ("topicsrv_build", buildinfo.describe()),
        ("redis_git_sha1", "00000000"), ("redis_git_dirty", 0), ("redis_build_id", "topicsrv"),
        ("redis_mode", "standalone"),
        ("os", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("arch_bits", 64), ("monotonic_clock", "POSIX clock_gettime"),
        ("multiplexing_api", "trio"), ("atomicvar_api", "python"), ("gcc_version", "0.0.0"),
        ("process_id", os.getpid()), ("process_supervised", "no"),
        ("run_id", ctx.server.repl.run_id), ("tcp_port", ctx.front.port),
        ("server_time_usec", time.time_ns() // 1000), ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400), ("hz", 10), ("configured_hz", 10),
        ("lru_clock", int(time.time()) & ((1 << 24) - 1)), ("executable", "topicsrv"),
        ("config_file", ""), ("io_threads_active", 0),
    ]


def _clients(ctx: CommandContext) -> Section:
    clients = ctx.front.clients.values()
    return [
        ("connected_clients", len(ctx.front.clients)), ("cluster_connections", 0),
        ("maxclients", ctx.server.admission.maxclients),
        ("client_recent_max_input_buffer", 0),
        ("client_recent_max_output_buffer", max((c.out_pending for c in clients), default=0)),
        ("blocked_clients", sum(1 for c in clients if c.blocked)),
        ("paused_output_clients", sum(1 for c in clients if c.paused)),
        ("tracking_clients", 0), ("clients_in_timeout_table", 0),
    ]


def _memory(ctx: CommandContext) -> Section:
    data = sum(t.bytes for t in ctx.engine.topics.values()) + ctx.engine.keyspace.nbytes
    rss = rss_bytes()
    limit = ctx.server.memory.limit
    return [
        ("used_memory", data), ("used_memory_human", human(data)),
        ("used_memory_rss", rss), ("used_memory_rss_human", human(rss)),
        ("used_memory_peak", max(data, rss)), ("used_memory_peak_human", human(max(data, rss))),
        ("used_memory_dataset", data), *_scripting_memory(ctx),
        ("maxmemory", limit), ("maxmemory_human", human(limit)),
        ("maxmemory_policy", "noeviction"), ("mem_fragmentation_ratio", "1.00"),
        ("mem_allocator", "pymalloc"), ("active_defrag_running", 0),
        ("lazyfree_pending_objects", ctx.server.lazyfree.pending_count()),
        ("lazyfreed_objects", ctx.server.lazyfree.freed),
    ]


def _scripting_memory(ctx: CommandContext) -> Section:
    """The scripts' and functions' Lua states and counts (Redis 7.0's fields); nothing is
    made for INFO: before the first script every count is 0."""
    sc: Any = ctx.server.scripting
    if sc is None:
        scripts = functions = libraries = eval_vm = functions_vm = 0
    else:
        scripts, eval_vm = len(sc.scripts.scripts), sc.scripts.memory_used()
        libs = sc.libraries
        functions, libraries = len(libs.functions), len(libs.libraries)
        functions_vm = libs.state.memory_used()
    return [
        ("used_memory_lua", eval_vm), ("used_memory_vm_eval", eval_vm),
        ("used_memory_lua_human", human(eval_vm)), ("number_of_cached_scripts", scripts),
        ("number_of_functions", functions), ("number_of_libraries", libraries),
        ("used_memory_vm_functions", functions_vm),
        ("used_memory_vm_total", eval_vm + functions_vm),
        ("used_memory_vm_total_human", human(eval_vm + functions_vm)),
    ]


def _stats(ctx: CommandContext) -> Section:
    st, engine, bus = ctx.front.stats, ctx.engine, ctx.server.bus
    return [
        ("total_connections_received", st.total_connections),
        ("total_commands_processed", st.total_commands), ("instantaneous_ops_per_sec", 0),
        ("total_net_input_bytes", st.net_input_bytes),
        ("total_net_output_bytes", st.net_output_bytes),
        ("rejected_connections", st.rejected_connections + ctx.server.admission.rejected_maxclients),
        ("sync_full", ctx.server.primary.full_syncs),
        ("sync_partial_ok", ctx.server.primary.partial_syncs),
        ("sync_partial_err", ctx.server.primary.partial_refused),
        ("expired_keys", engine.keyspace.stats["expired_keys"]),
        ("evicted_keys", 0), ("evicted_clients", 0),
        ("keyspace_hits", st.keyspace_hits), ("keyspace_misses", st.keyspace_misses),
        ("pubsub_channels", len(bus.channels)), ("pubsub_patterns", len(bus.patterns)),
        ("pubsubshard_channels", len(bus.shard_channels)),
        *_forks(ctx),
        ("total_blocking_keys", ctx.server.notifier.waiting_topics()),
        ("unexpected_error_replies", st.unexpected_errors),
        ("total_error_replies", sum(ERROR_STATS.values())),
        ("client_output_limit_disconnections", st.output_limit_disconnects),
        ("client_output_limit_refusals", st.output_limit_refusals),
        ("security_attacks_refused", st.security_attacks),
        ("pubsub_messages_published", bus.stats.published),
        ("pubsub_messages_delivered", bus.stats.delivered),
        ("pubsub_messages_dropped", bus.stats.dropped),
        ("pubsub_slow_subscriber_disconnections", bus.stats.slow_disconnects),
        ("pubsub_max_pending_bytes", bus.stats.max_pending),
        ("records_written", engine.stats.get("records_written", 0)),
        ("records_read", engine.stats.get("records_read", 0)),
    ]


def _replication(ctx: CommandContext) -> Section:
    return replication_section(ctx)


def _cpu(ctx: CommandContext) -> Section:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        ("used_cpu_sys", f"{ru.ru_stime:.6f}"), ("used_cpu_user", f"{ru.ru_utime:.6f}"),
        ("used_cpu_sys_children", f"{ch.ru_stime:.6f}"),
        ("used_cpu_user_children", f"{ch.ru_utime:.6f}"),
        ("used_cpu_sys_main_thread", f"{ru.ru_stime:.6f}"),
        ("used_cpu_user_main_thread", f"{ru.ru_utime:.6f}"),
    ]


def _errorstats(ctx: CommandContext) -> Section:
    return [(f"errorstat_{k}", f"count={v}") for k, v in sorted(ERROR_STATS.items()) if v]


def _keyspace(ctx: CommandContext) -> Section:
    ks = ctx.engine.keyspace
    n = ks.size()
    avg = ks.expiry.avg_ttl(ctx.engine.now())
    return [("db0", f"keys={n},expires={len(ks.expiry)},avg_ttl={avg}")] if n else []


def _none(ctx: CommandContext) -> Section:
    return []


def _commandstats(ctx: CommandContext) -> Section:
    """redis-server's `cmdstat_<name>` lines (dispatch.py Rule 10), commands never counted
    left out; `usec` is whole microseconds, `usec_per_call` with two decimals."""
    out: Section = []
    for name, (calls, seconds, rejected, failed) in ctx.front.cmdstats.items():
        usec = int(seconds * 1e6)
        per = usec / calls if calls else 0.0
        out.append((f"cmdstat_{name}", f"calls={int(calls)},usec={usec},usec_per_call={per:.2f},"
                                       f"rejected_calls={int(rejected)},failed_calls={int(failed)}"))
    return out


BUILDERS = {
    "server": _server, "clients": _clients, "memory": _memory, "persistence": persistence_section,
    "stats": _stats, "replication": _replication, "cpu": _cpu, "modules": _none,
    "commandstats": _commandstats, "errorstats": _errorstats, "latencystats": _none,
    "cluster": lambda ctx: [("cluster_enabled", 0)], "keyspace": _keyspace,
}


def wanted_sections(args: list[bytes]) -> set[str]:
    wanted = {a.decode("latin-1").lower() for a in args} or {"default"}
    out: set[str] = set()
    for w in wanted:
        if w == "default":
            out |= DEFAULT
        elif w in ("all", "everything"):
            out |= ALL
        else:
            out.add(w)
    return out


def info_text(ctx: CommandContext, args: list[bytes]) -> str:
    names = wanted_sections(args)
    chunks = []
    for name, header in SECTIONS:
        if name in names:
            lines = [f"# {header}"] + [f"{k}:{v}" for k, v in BUILDERS[name](ctx)]
            chunks.append("\r\n".join(lines) + "\r\n")
    return "\r\n".join(chunks)


@command("info", -1, ["loading", "stale"], 0, 0, 0, "server",
         "Get information and statistics about the server", "1.0.0", syntax="[section:string...]")
def info(ctx: CommandContext, args: list[bytes]) -> Any:
    return Verbatim(info_text(ctx, args))


def _forks(ctx: CommandContext) -> list[tuple[str, Any]]:
    """The checkpoint's children (storage/forksave.py), as Redis's BGSAVE forks."""
    storage = ctx.server.storage
    saves = storage.saves if storage is not None else None
    return [("latest_fork_usec", saves.fork_usec if saves is not None else 0),
            ("total_forks", saves.forks if saves is not None else 0)]
