"""The server process: one engine, its storage, and the fronts, in one trio nursery.

Rule 1: fronts are started with `nursery.start` and report their bound address, so a port of
0 works and the startup line names the real ports.
Rule 2: `ctx.ready` flips only after recovery; /v0/ready answers 503 until then.
Rule 3: SIGTERM/SIGINT and SHUTDOWN start a graceful stop (topicsrv/lifecycle.py: stop
accepting, requests in flight finish within --shutdown-grace, the rest is cancelled), then
storage flushes and checkpoints, then exit.
"""

from __future__ import annotations

import logging
import signal
from functools import partial
from typing import TYPE_CHECKING

import trio

from topicsrv import buildinfo
from topicsrv.admission import is_loopback, size_maxclients
from topicsrv.clock import Clock
from topicsrv.context import ServerConfig, ServerContext, make_context
from topicsrv.errors import StartupError
from topicsrv.tasks.replica import Link

if TYPE_CHECKING:
    from topicsrv.storage.store import Storage

__all__ = ["ServerConfig", "ServerContext", "make_context", "run"]

log = logging.getLogger("topicsrv")


def _warn_exposed(config: ServerConfig) -> None:
    """Say at startup what protected mode will refuse (or that it is off) on a non-loopback bind."""
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


def _check_roles(config: ServerConfig) -> None:
    """`--read-token` only restricts anything beside a full credential (acl.py, guards.py)."""
    if not config.read_token:
        return
    if not config.token:
        raise StartupError("--read-token needs --token: without a full token every HTTP "
                           "client has full access, so a read-only one would restrict nothing")
    if config.read_token == config.token:
        raise StartupError("--read-token must differ from --token")
    if not config.requirepass:
        log.warning("RESP: --read-token defines the read-only user 'reader', but without "
                    "--requirepass every RESP client is the 'default' user with full access")


def _shown(ctx: ServerContext, name: str) -> str:
    """A listener's name in the startup line ("https" when the HTTP port speaks TLS)."""
    return "https" if name == "http" and ctx.tls is not None else name


async def _watch_signals(ctx: ServerContext, nursery: trio.Nursery) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:  # a second one cuts the grace short (lifecycle Rule 3)
            log.info("received %s: shutting down", signal.Signals(signum).name)
            _stop(ctx, nursery)


def _replication_role(ctx: ServerContext) -> None:
    """replication.json (what REPLICAOF / CONFIG REWRITE last decided) wins over --replicaof
    (topicsrv/repl/state.py Rule 3)."""
    state = ctx.repl
    state.changed = trio.Event()
    if state.load():
        log.info("replication role from %s: %s", state.data_dir,
                 f"replica of {state.master[0]}:{state.master[1]}" if state.master else "primary")
    if state.master is not None:
        ctx.engine.keyspace.passive = True
        state.save()  # without `clean`: from now on the disk moves past what it says


def _link(ctx: ServerContext) -> Link:
    """The replica's link task; the function libraries it receives go to the scripting
    service (scripting/service.py Rule 7), made on first use (lupa loads then)."""
    link = Link(ctx)

    def functions(codes: list[bytes]) -> None:
        from topicsrv.scripting.service import scripting_of

        scripting_of(ctx).replace_all(codes)

    link.applier.on_functions = functions
    return link


def _replica_stopped(ctx: ServerContext, storage: Storage) -> None:
    """A replica stopped cleanly: its disk holds exactly what it applied (state.py Rule 3)."""
    state = ctx.repl
    if state.master is None or storage.discarded or not storage.closed:
        return
    if state.resume is None:
        state.resume = (state.replid, state.offset)
    try:
        state.save(clean=True)
    except OSError as exc:
        log.error("replication.json not written at shutdown: %s", exc)


def _stop(ctx: ServerContext, nursery: trio.Nursery) -> None:
    """Rule 3: a graceful stop (topicsrv/lifecycle.py), then the nursery is cancelled."""
    ctx.shutting_down = True
    nursery.start_soon(ctx.drain.shutdown, ctx.admission.stop_accepting,
                       ctx.config.shutdown_grace_s, nursery.cancel_scope.cancel)


async def run(
    config: ServerConfig,
    *,
    clock: Clock | None = None,
    handle_signals: bool = True,
    task_status: trio.TaskStatus[ServerContext] = trio.TASK_STATUS_IGNORED,
) -> None:
    from topicsrv.http.server import serve_http
    from topicsrv.tasks.expiry import expire_keys

    _check_roles(config)
    ctx = make_context(config, clock)
    _replication_role(ctx)
    from topicsrv.resp.server import serve_resp
    ctx.admission.maxclients = size_maxclients(config.maxclients)
    _warn_exposed(config)
    storage = None
    if config.storage:
        from topicsrv.storage.store import Storage

        storage = ctx.storage = Storage(
            ctx.engine, config.data_dir, shards=config.wal_shards, cold_dir=config.cold_dir,
            checkpoint_interval_s=config.checkpoint_interval_s,
            keyspace_class=config.keyspace_durability)
        storage.replica = ctx.repl.master is not None  # tasks/replica.py
        storage.saves.fork = config.checkpoint_fork  # storage/keyspacesave.py Rule 0
        storage.refuse_until_recovered()
    try:
        async with trio.open_nursery() as nursery:
            if handle_signals:
                nursery.start_soon(_watch_signals, ctx, nursery)
            ctx.request_shutdown = partial(_stop, ctx, nursery)
            await nursery.start(ctx.claims_service().run)
            if config.http_port is not None:
                ctx.addresses["http"] = await nursery.start(serve_http, ctx)
            if config.resp_port is not None or config.tls_port is not None:
                await nursery.start(serve_resp, ctx)  # sets addresses "resp" and "resp-tls"
            parts = [f"{_shown(ctx, name)}={host}:{port}"
                     for name, (host, port) in ctx.addresses.items()]
            log.debug("bound %s; serving once recovered", " ".join(parts))
            log.info("hot path: %s", buildinfo.describe())
            if storage is not None:  # /v0/ready stays 503 until fsync/disk topics are back
                await storage.open()
                await nursery.start(storage.run)
            # routers forward once recovery has re-derived their dests (storage calls forward)
            await nursery.start(ctx.routers_service().run)
            nursery.start_soon(expire_keys, ctx.engine)  # a replica's keyspace is passive
            nursery.start_soon(_link(ctx).run)  # follows a primary while this is a replica
            nursery.start_soon(ctx.lazyfree.run)  # topicsrv/lazyfree.py
            ctx.ready = True
            # the startup line comes once recovered, so a script may write right after it; it
            # is the one `listening` line (stdout), the log above only says what was bound
            print("listening " + " ".join(parts), flush=True)
            task_status.started(ctx)
    finally:
        if storage is not None:  # flush and fsync everything acked, final checkpoint
            with trio.CancelScope(shield=True):
                await storage.close()
            _replica_stopped(ctx, storage)
