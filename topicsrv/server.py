"""The server process: one engine, its storage, and the fronts, in one trio nursery.

Rule 1: fronts are started with `nursery.start` and report their bound address, so a port of
0 works and the startup line names the real ports.
Rule 2: `ctx.ready` flips only after recovery; /v0/ready answers 503 until then.
Rule 3: SIGTERM/SIGINT start a clean shutdown: fronts stop, storage flushes, then exit.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from topicsrv.admission import Admission, size_maxclients
from topicsrv.clock import Clock, SystemClock
from topicsrv.engine import Engine
from topicsrv.memory import MemoryGuard
from topicsrv.notify import Notifier

log = logging.getLogger("topicsrv")


@dataclass
class ServerConfig:
    data_dir: Path = Path("./data")
    bind: str = "127.0.0.1"
    http_port: int | None = 7070
    resp_port: int | None = 6379
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()  # extra HTTP Host names ("*" = any); see http/guards.py
    requirepass: str | None = None
    heartbeat_s: float = 15.0
    max_body_bytes: int = 64 << 20
    proto_max_bulk_len: int = 512 << 20
    client_output_limit: int = 64 << 20
    wal_shards: int = 4
    cold_dir: Path | None = None
    checkpoint_interval_s: float = 60.0
    storage: bool = True
    resp_io: str = "reactor"  # RESP I/O path: "reactor" (one epoll task) or "tasks" (per connection)
    maxclients: int = 10000  # client connections over both fronts (sized to RLIMIT_NOFILE at start)
    protected_mode: bool = True  # a front without password/token serves loopback clients only
    trusted_nets: tuple[str, ...] | None = None  # tests: networks that count as local
    max_memory: int = 0  # bytes of RSS past which writes are refused (0 = no limit)


@dataclass
class ServerContext:
    config: ServerConfig
    engine: Engine
    notifier: Notifier
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    shutting_down: bool = False
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    storage: Any = None
    metrics: dict[str, Any] = field(default_factory=dict)
    admission: Admission = field(default_factory=lambda: Admission(10000))
    memory: MemoryGuard = field(default_factory=lambda: MemoryGuard(0))


def make_context(config: ServerConfig, clock: Clock | None = None) -> ServerContext:
    engine = Engine(clock=clock or SystemClock())
    notifier = Notifier()
    engine.listeners.append(notifier.changed)
    admission = Admission(config.maxclients, protected_mode=config.protected_mode,
                          trusted_nets=config.trusted_nets)
    return ServerContext(config=config, engine=engine, notifier=notifier, admission=admission,
                         memory=MemoryGuard(config.max_memory))


def _warn_exposed(config: ServerConfig) -> None:
    """Say at startup what protected mode will refuse (or that it is off) on a non-loopback bind."""
    from topicsrv.admission import is_loopback

    if is_loopback(config.bind):
        return
    if not config.protected_mode:
        if not (config.token and config.requirepass):
            log.warning("protected mode is off and %s is reachable on %s without a credential: "
                        "anyone who can reach it can read and delete everything",
                        "HTTP" if not config.token else "RESP", config.bind)
        return
    for front, credential, flag in (("RESP", config.requirepass, "--requirepass"),
                                    ("HTTP", config.token, "--token")):
        if not credential:
            log.warning("protected mode: %s binds %s but has no %s, so it serves loopback "
                        "clients only (set %s, or --protected-mode no on a trusted network)",
                        front, config.bind, flag, flag)


async def _watch_signals(ctx: ServerContext, cancel_scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s: shutting down", signal.Signals(signum).name)
            ctx.shutting_down = True
            cancel_scope.cancel()
            return


async def run(
    config: ServerConfig,
    *,
    clock: Clock | None = None,
    handle_signals: bool = True,
    task_status: trio.TaskStatus[ServerContext] = trio.TASK_STATUS_IGNORED,
) -> None:
    from topicsrv.http.server import serve_http

    ctx = make_context(config, clock)
    from topicsrv.resp.server import serve_resp
    ctx.admission.maxclients = size_maxclients(config.maxclients)
    _warn_exposed(config)
    storage = None
    if config.storage:
        from topicsrv.storage.store import Storage

        storage = ctx.storage = Storage(
            ctx.engine, config.data_dir, shards=config.wal_shards, cold_dir=config.cold_dir,
            checkpoint_interval_s=config.checkpoint_interval_s)
        storage.refuse_until_recovered()
    try:
        async with trio.open_nursery() as nursery:
            if handle_signals:
                nursery.start_soon(_watch_signals, ctx, nursery.cancel_scope)
            if config.http_port is not None:
                ctx.addresses["http"] = await nursery.start(serve_http, ctx)
            if config.resp_port is not None:
                ctx.addresses["resp"] = await nursery.start(serve_resp, ctx)
            parts = [f"{name}={host}:{port}" for name, (host, port) in ctx.addresses.items()]
            log.info("listening %s", " ".join(parts))
            if storage is not None:  # /v0/ready stays 503 until fsync/disk topics are back
                await storage.open()
                await nursery.start(storage.run)
            ctx.ready = True
            # the startup line comes once recovered, so a script may write right after it
            print("listening " + " ".join(parts), flush=True)
            task_status.started(ctx)
    finally:
        if storage is not None:  # flush and fsync everything acked, final checkpoint
            with trio.CancelScope(shield=True):
                await storage.close()
