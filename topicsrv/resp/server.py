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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial

import trio

from topicsrv.admission import DENIED_TEXT, MAXCLIENTS_TEXT
from topicsrv.context import ServerContext
from topicsrv.resp import reactor
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Client, Front
from topicsrv.resp.connection import Connection

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


def refusal(reason: str) -> bytes:
    """What a refused client reads before the close (topicsrv/admission.py)."""
    text = DENIED_TEXT if reason == "denied" else MAXCLIENTS_TEXT
    return b"-" + text.encode() + b"\r\n"


def accept(ctx: ServerContext, listeners: list[trio.SocketListener],
           handler: Callable[[trio.SocketStream], Awaitable[None]]) -> Awaitable[None]:
    """Serve `listeners` through the admission gate (protected mode, maxclients)."""
    return ctx.admission.serve(listeners, handler, name="RESP",
                               has_credential=lambda: bool(ctx.config.requirepass),
                               refuse=refusal)


async def serve_resp(
    ctx: ServerContext, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
) -> None:
    load_all()
    front = Front()
    ctx.metrics.resp = front
    ctx.admission.register(lambda: len(front.clients))
    port = ctx.config.resp_port or 0
    listeners = await trio.open_tcp_listeners(port, host=ctx.config.bind)
    sockname = listeners[0].socket.getsockname()
    front.port = int(sockname[1])
    mode = ctx.config.resp_io
    if mode == "reactor" and not reactor.available():
        mode = "tasks"
    front.io = mode
    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_idle_clients, front)
        if mode == "reactor":
            nursery.start_soon(reactor.serve_reactor, ctx, front, nursery,
                               partial(accept, ctx, listeners))
        else:
            nursery.start_soon(accept, ctx, listeners, partial(_handle, ctx, front))
        task_status.started((str(sockname[0]), int(sockname[1])))
