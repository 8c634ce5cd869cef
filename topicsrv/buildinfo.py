"""Which build of the hot path runs: compiled extension modules or the plain Python source.

Rule 1 (one source of truth): every module in HOT_MODULES is plain, typed Python that runs and
passes every test as it is; setup.py compiles these modules at install time (`pip install -e .`,
so `make setup`) into extension modules that sit next to their `.py`. Nothing else differs.
Rule 2 (fallback): no compiler, no headers or no build tool: the install goes on without the
extensions (setup.py prints one warning), and the `.py` files run.
Rule 3 (runtime switch): TOPICS_PURE=1 in the environment makes every hot module load from
its `.py` even when an extension is built (an import hook installed by topicsrv/__init__.py
before any hot module is imported). An extension older than its `.py` (a source edited after
the build) makes ALL hot modules load from source: mypyc compiles them as one unit whose
modules call each other natively, so one stale module cannot be swapped alone.
Rule 4: `describe()` reports what really runs (the file each hot module was loaded from), for
the serve log, INFO (`topicsrv_build`) and /v0/ready (`build`).

This module must stay importable by setup.py before the package's dependencies exist:
standard library only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

ENV_PURE = "TOPICS_PURE"

# The modules setup.py compiles (mypyc; docs/performance.md "Compiled hot path" says how each
# was chosen). Synchronous modules only: no async functions (trio wants its own coroutines),
# no blocking I/O (resp/pump.py only calls non-blocking socket methods), no classes that tests monkeypatch or that must behave as Python classes
# (native classes refuse new attributes and implement only the protocols they declare).
# Their module-level constants are Final (read as C statics): rebinding one at run time does
# not reach compiled code (docs/decisions.md, "The request path's state is compiled").
HOT_MODULES: tuple[str, ...] = (
    "topicsrv.resp.protocol",  # request framing
    "topicsrv.bus.bus",  # pub/sub fan-out: one offer a delivery (issue 38)
    "topicsrv.resp.pubsub",  # the RESP subscriber
    "topicsrv.bus.limits",  # the output-buffer check, once a delivery
    "topicsrv.resp.encoder",  # reply encoding
    "topicsrv.resp.ids",
    "topicsrv.resp.args",
    "topicsrv.resp.commands.stream_args",  # XADD / XREAD argument parsing
    "topicsrv.engine.log.entries",  # record -> RESP entry bytes
    "topicsrv.engine.log.records",
    "topicsrv.storage.codec",  # WAL record codec
    "topicsrv.engine.log.topic",  # append, locate, read slices
    "topicsrv.engine.log.writes",  # Engine.write's body
    "topicsrv.engine.log.reads",
    "topicsrv.resp.replysize",
    "topicsrv.latency",  # the per-command latency histogram
    "topicsrv.resp.dispatch",
    "topicsrv.resp.batch",  # XADD coalescing
    "topicsrv.resp.session",  # the per-connection loop
    "topicsrv.engine.queues.leases",  # the lease projection
    "topicsrv.engine.queues.queues",  # claim / ack / nack / extend
    "topicsrv.resp.commands.queues",  # TOPIC.CLAIM / ACK / NACK / EXTEND
    "topicsrv.engine.keyspace.values",  # string values: integers, floats, encodings
    "topicsrv.engine.keyspace.expiry",  # the expiry index
    "topicsrv.engine.keyspace.space",  # GET / the keyspace write path
    "topicsrv.engine.keyspace.host",  # a write's listeners told (WATCH, waiters)
    "topicsrv.notify.names",  # whether any waiter waits (asked by every keyspace write)
    "topicsrv.engine.keyspace.strings",  # SET / INCR / ... operations
    "topicsrv.resp.commands.string_args",  # SET / GETEX option parsing
    "topicsrv.resp.commands.strings",  # GET / SET / INCR / ... commands
    "topicsrv.resp.pump",  # the reactor's pass: recv, step, send per ready socket
    "topicsrv.engine.keyspace.ops",  # the keyspace operation codec (one per SET at P1)
    "topicsrv.engine.keyspace.snapshot",  # the checkpoint's keyspace, one part per loop turn
    "topicsrv.resp.commands.topic_rows",  # TOPIC.ROWS: the Spark source's columns
    "topicsrv.engine.keyspace.packed",  # the packed runs of small lists and hashes
    "topicsrv.engine.keyspace.quicklist",  # LPUSH / RPOP / LRANGE on a list's nodes
    "topicsrv.engine.keyspace.lists",  # the list operations
    "topicsrv.engine.keyspace.hashes",  # the hash operations
    "topicsrv.engine.keyspace.colls",  # applying a list or hash change (every LPUSH / HSET)
    "topicsrv.engine.keyspace.hashvalue",  # HSET / HGET on a hash's run or dict
    "topicsrv.resp.commands.lists",  # LPUSH / RPOP / ... commands
    "topicsrv.resp.commands.lists_blocking",  # BRPOP / BLPOP / BLMOVE: a worker's every pop
    "topicsrv.resp.commands.hashes",  # HSET / HGET / ... commands
    "topicsrv.resp.batch_colls",  # runs of LPUSH / RPOP / HSET / HGET past the dispatcher
    "topicsrv.storage.walqueue",  # a WAL shard's batch: every durable write enqueues here
    "topicsrv.storage.frames",  # the frame header + checksum of every WAL write
    "topicsrv.memory",  # --max-memory's check before every write
    "topicsrv.clock",  # every TTL check and access stamp reads it
    "topicsrv.resp.state",  # Client / Front / CommandContext: fields read by every request
    "topicsrv.context",  # ServerContext / ServerConfig / Metrics: likewise (ctx.server.*)
    "topicsrv.engine.keyspace.zsetorder",  # a big sorted set's dict and chunked order
    "topicsrv.engine.keyspace.zsetvalue",  # a sorted set's packed run and big form
    "topicsrv.engine.keyspace.zsetrange",  # score and lex bounds, positions of a range
    "topicsrv.engine.keyspace.zsets",  # the sorted-set operations
    "topicsrv.engine.keyspace.setvalue",  # a set's intset, packed run or Table
    "topicsrv.engine.keyspace.sets",  # the set operations
    "topicsrv.resp.commands.zsets",  # ZADD / ZSCORE / ZPOPMIN / ... commands
    "topicsrv.resp.commands.zsets_range",  # ZRANGE / ZRANGEBYSCORE / ...
    "topicsrv.resp.commands.sets",  # SADD / SISMEMBER / ... commands
    "topicsrv.storage.replapply",  # a replica applies its primary's frames (every XADD / SET)
    "topicsrv.engine.restore",  # put_live: a replica's APPEND frames; recovery's slots
    "topicsrv.repl.backlog",  # a primary feeds every WAL frame to its replicas' output
    "topicsrv.engine.keyspace.runs",  # a run of LPUSH / HSET / ZADD / ... as one operation
    "topicsrv.resp.commands.scripts",  # EVALSHA and the redis.call bridge (issue 38)
    "topicsrv.scripting.lua",  # the Lua state: a script's run and each redis.call's crossing
    "topicsrv.scripting.convert",  # a reply's conversions between RESP and Lua
    "topicsrv.scripting.bridge",  # the memory cap kept across every crossing
    "topicsrv.scripting.runner",  # the greenlet a script runs in
    "topicsrv.scripting.service",  # a script's commit group and held changes
    "topicsrv.repl.state",  # the role every dispatched command reads (READONLY, WAIT's acks)
    "topicsrv.engine.groups.delivery",  # a PEL entry: acyclic, outside the cyclic GC
)

_stale: list[str] = []


def pure_requested() -> bool:
    return os.environ.get(ENV_PURE, "") not in ("", "0")


def _source_of(fullname: str, path: Sequence[str] | None) -> str | None:
    name = fullname.rpartition(".")[2]
    for entry in path or ():
        candidate = os.path.join(entry, name + ".py")
        if os.path.isfile(candidate):
            return candidate
    return None


def _extension_of(source: str) -> str | None:
    base = source[:-3]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.isfile(base + suffix):
            return base + suffix
    return None


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads every hot module from its `.py` when pure mode is asked for or an extension is
    stale (Rule 3); otherwise leaves the import to the normal finders."""

    def __init__(self, force: bool) -> None:
        self.force = force

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not self.force or fullname not in HOT_MODULES:
            return None
        source = _source_of(fullname, path)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _find_stale(root: str) -> list[str]:
    """The hot modules whose extension under `root` is older than their source."""
    stale = []
    for name in HOT_MODULES:
        source = os.path.join(root, *name.split(".")) + ".py"
        ext = _extension_of(source) if os.path.isfile(source) else None
        if ext is not None and os.path.getmtime(ext) < os.path.getmtime(source):
            stale.append(name)
    return stale


def install_hook() -> None:
    """Called once by topicsrv/__init__.py, before any hot module is imported."""
    if any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        return
    force = pure_requested()
    if not force:
        _stale[:] = _find_stale(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        force = bool(_stale)
    sys.meta_path.insert(0, _SourceFirst(force))


def loaded_from() -> dict[str, str]:
    """Each hot module -> "compiled" or "source" (importing it if needed)."""
    out: dict[str, str] = {}
    for name in HOT_MODULES:
        mod = importlib.import_module(name)
        path = getattr(mod, "__file__", "") or ""
        out[name] = "source" if path.endswith(".py") else "compiled"
    return out


def compiler() -> str:
    """Which tool built the extensions that are loaded ("cython", "mypyc" or "?")."""
    mod = importlib.import_module(HOT_MODULES[0])
    kinds = {type(v).__name__ for v in vars(mod).values() if callable(v)}
    if "cython_function_or_method" in kinds:
        return "cython"
    if any(k.endswith("__mypyc") for k in sys.modules):
        return "mypyc"
    return "?"


def mode() -> str:
    """"compiled" (every hot module), "pure" (none) or "partial"."""
    kinds = set(loaded_from().values())
    if kinds == {"compiled"}:
        return "compiled"
    return "pure" if kinds == {"source"} else "partial"


def describe() -> str:
    """One line for the log, INFO and /v0/ready."""
    m = mode()
    n = len(HOT_MODULES)
    if m == "compiled":
        return f"compiled ({compiler()}, {n} hot modules)"
    if pure_requested():
        return f"pure Python ({ENV_PURE}=1)"
    if _stale:
        return (f"pure Python (extension older than its source for {', '.join(_stale)}; "
                "`make setup` rebuilds)")
    if m == "pure":
        return "pure Python (not compiled at install: no C compiler or Python headers?)"
    compiled = [k for k, v in loaded_from().items() if v == "compiled"]
    return f"partial ({len(compiled)} of {n} hot modules compiled)"


def main() -> None:
    """`python -m topicsrv.buildinfo`: the Makefile prints this after the install."""
    from topicsrv import buildinfo  # the hook's state lives in the package's instance

    print(f"topicsrv hot path: {buildinfo.describe()}")
    if buildinfo.mode() != "compiled" and not pure_requested() and not buildinfo._stale:
        print("WARNING: topicsrv's hot path was not compiled, so it runs as pure Python (same "
              "behaviour, slower); compiling needs a C compiler and the Python headers "
              "(`pip install -v -e .` shows why it failed; `touch setup.py && make setup` "
              "retries).", file=sys.stderr)


if __name__ == "__main__":
    main()
