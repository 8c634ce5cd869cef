"""The RESP listener: `serve_resp(ctx, task_status=...)` (started by topicsrv.server.run).

Rule 1: binds `ctx.config.bind` (127.0.0.1 by default: protected like redis-server's
protected mode) on `ctx.config.resp_port` (0 = a free port) and reports the bound address.
Rule 2: `ctx.config.resp_io` picks the I/O path: "reactor" (default; one task serving every
idle socket through epoll, topicsrv/resp/reactor.py) or "tasks" (one task per connection,
topicsrv/resp/connection.py). Where epoll is unavailable "reactor" falls back to "tasks".
Rule 3: every accepted socket passes the admission gate first (topicsrv/admission.py:
protected mode refuses non-loopback clients while no --requirepass is set; maxclients).
Rule 4: the front's shared state (`Front`: clients, stats) is `ctx.metrics.resp`
so INFO/CLIENT and the ops endpoints can read it.
Rule 5 (idle timeout, Redis's `timeout`): with `CONFIG SET timeout N` (seconds, 0 = never, the
default) a client that sent no command for more than N seconds is closed, checked once a
second as redis-server's clientsCron does; a client blocked in a command, or with replies
still unsent, is not idle.
Rule 6 (TLS, topicsrv/tls.py): with `--tls-port` a second listener serves RESP over TLS, on
the task path (topicsrv/resp/tlsio.py) whatever `--resp-io` says; `--resp-port off` leaves
only the TLS one. Both share one front (clients, stats, CLIENT LIST); the bound addresses
are `ctx.addresses["resp"]` and `["resp-tls"]`, and the plain one (else the TLS one) is
reported to the starter.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial

import trio

from topicsrv import tls
from topicsrv.admission import DENIED_TEXT, MAXCLIENTS_TEXT, Secure, open_listeners
from topicsrv.context import ServerContext
from topicsrv.resp import reactor
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Client, Front
from topicsrv.resp.connection import Connection
from topicsrv.resp.tlsio import TlsConnection

log = logging.getLogger(__name__)


async def _handle(ctx: ServerContext, front: Front, stream: trio.SocketStream) -> None:
    await Connection(ctx, front, stream).run()


def idle_clients(clients: Iterable[Client], now: float, timeout: int) -> list[Client]:
    """The clients to close for idleness (Rule 5); none when `timeout` is 0."""
    if timeout <= 0:
        return []
    return [c for c in clients if now - c.last_interaction > timeout and not c.blocked
            and not c.out_pending and not c.killed]


async def close_idle_clients(front: Front) -> None:
    """Rule 5's sweep, once a second for the life of the front."""
    while True:
        await trio.sleep(1.0)
        timeout = int(front.settings.get("timeout", "0"))
        for c in idle_clients(list(front.clients.values()), time.monotonic(), timeout):
            log.info("closing idle client %d (%s): no command for over %d s (timeout)",
                     c.id, c.addr, timeout)
            c.kill()


async def _handle_tls(ctx: ServerContext, front: Front, context: ssl.SSLContext,
                      stream: trio.SocketStream) -> None:
    await TlsConnection(ctx, front, stream, context).run()


def refusal(reason: str) -> bytes:
    """What a refused client reads before the close (topicsrv/admission.py)."""
    text = DENIED_TEXT if reason == "denied" else MAXCLIENTS_TEXT
    return b"-" + text.encode() + b"\r\n"


def accept(ctx: ServerContext, listeners: list[trio.SocketListener],
           handler: Callable[[trio.SocketStream], Awaitable[None]],
           secure: Secure | None = None) -> Awaitable[None]:
    """Serve `listeners` through the admission gate (protected mode, maxclients)."""
    return ctx.admission.serve(listeners, handler, name="RESP" if secure is None else "RESP-TLS",
                               has_credential=lambda: bool(ctx.config.requirepass),
                               refuse=refusal, secure=secure)


async def serve_resp(
    ctx: ServerContext, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
) -> None:
    load_all()
    front = Front()
    ctx.metrics.resp = front
    ctx.admission.register(lambda: len(front.clients))
    cfg = ctx.config
    listeners = tls_listeners = None
    if cfg.resp_port is not None:
        listeners = await open_listeners(cfg.resp_port, cfg.bind, "--resp-port")
        ctx.addresses["resp"] = _address(listeners)
    if cfg.tls_port is not None and ctx.tls is not None:
        tls_listeners = await open_listeners(cfg.tls_port, cfg.bind, "--tls-port")
        ctx.addresses["resp-tls"] = _address(tls_listeners)
    front.port = (ctx.addresses.get("resp") or ctx.addresses["resp-tls"])[1]
    mode = cfg.resp_io
    if mode == "reactor" and not reactor.available():
        mode = "tasks"
    front.io = mode
    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_idle_clients, front)
        if listeners is not None and mode == "reactor":
            nursery.start_soon(reactor.serve_reactor, ctx, front, nursery,
                               partial(accept, ctx, listeners))
        elif listeners is not None:
            nursery.start_soon(accept, ctx, listeners, partial(_handle, ctx, front))
        if tls_listeners is not None and ctx.tls is not None:  # Rule 6: always the task path
            nursery.start_soon(partial(accept, ctx, tls_listeners,
                                       partial(_handle_tls, ctx, front, ctx.tls),
                                       secure=partial(tls.accept, context=ctx.tls)))
        task_status.started(ctx.addresses.get("resp") or ctx.addresses["resp-tls"])


def _address(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    sockname = listeners[0].socket.getsockname()
    return str(sockname[0]), int(sockname[1])
