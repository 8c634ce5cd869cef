"""The task-per-connection I/O adapter of the RESP front (`resp_io="tasks"`), and `drive`: the
task loop that serves a session, also run by the reactor (topicsrv/resp/reactor.py) while one
of its connections must wait.

Everything a RESP connection means lives in the sans-IO session (topicsrv/resp/session.py);
this module only reads, sends and waits, as the session's outcomes say.

Rule 1: `drive` acts on the outcomes and nothing else: it awaits the commits (WAIT_COMMIT),
sends all the output, then NEED_DATA reads (or, for the reactor, returns the idle socket),
WAIT_COMMAND awaits the command while reading input into the session for as long as it wants
input (EOF cancels the wait), YIELD is a checkpoint, CLOSE returns.
Rule 2: every read and every send is a trio checkpoint, so a busy client never holds the loop.
Rule 3: CLIENT KILL (`client.kill`) cancels the connection's scope: a read, a send or a wait
ends at once and the socket closes.
Rule 4: a bug outside any command (dispatch guards those) costs its connection, never the
front: counted in unexpected_errors and logged.
Rule 5 (no pipeline deadlock, session Rule 2b): output the socket does not take at once does
not stop the reading: while the session is idle with replies pending, the loop waits for the
socket to become readable or writable, whichever comes first, reads and runs the input, and
sends when it can; only output that must go out first (before a wait, a turn or the close) is
sent blocking. The client's pending output is bounded by the session (client_output_limit).
Rule 6 (pub/sub, session Rule 9): a subscribed client's read is woken by `session.wake()`
when the bus appends a message to its output; the read is cancelled (trio's reads, and
TlsIO's, take no data when cancelled) and the loop sends the output, then reads again.
Connections that never subscribed read without the extra cancel scope.
Rule 7: a blocking command that waited through the delivery scheduler (XREAD/XREADGROUP BLOCK,
TOPIC.CLAIM BLOCK) ends its turn when its reply has gone out: `drive` holds the task's
`notify.Delivery` and reports once the output is all sent, and when it returns
(topicsrv/notify/__init__.py Rule 8). A `Block` (topicsrv/notify/blocks.py) is awaited like
any command; before each attempt it peeks at the socket (`_peer_open`), so a client that has
left is served nothing (its EOF, read by `_watch_input`, then ends the wait).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import trio

from topicsrv import notify
from topicsrv.context import ServerContext
from topicsrv.lifecycle import Drain
from topicsrv.notify.blocks import Block
from topicsrv.resp.commands.base import Front
from topicsrv.resp.pump import READ_SIZE
from topicsrv.resp.session import (
    CLOSE,
    FLUSH,
    NEED_DATA,
    WAIT_COMMAND,
    WAIT_COMMIT,
    YIELD,
    Outcome,
    Session,
)

log = logging.getLogger("topicsrv.resp")



def sock_addr(sock: Any, peer: bool) -> str:
    try:
        host, port = (sock.getpeername() if peer else sock.getsockname())[:2]
        return f"{host}:{port}"
    except (OSError, ValueError):  # ValueError: a unix socket's name is a path, or empty
        return "?:0"


class SocketIO:
    """What `drive` needs of a socket: trio's awaitable recv/send, a send that takes only what
    fits now, and a wait for readable-or-writable (Rule 5). Tests pass an in-memory twin."""

    __slots__ = ("raw", "sock")

    def __init__(self, raw: socket.socket) -> None:
        self.raw = raw  # non-blocking
        self.sock = trio.socket.from_stdlib_socket(raw)

    async def recv(self, size: int) -> bytes:
        return await self.sock.recv(size)

    async def send(self, data: Any) -> int:
        return await self.sock.send(data)

    def send_nowait(self, data: Any) -> int:
        try:
            return self.raw.send(data)
        except BlockingIOError:
            return 0

    def recv_nowait(self, size: int) -> bytes | None:
        try:
            return self.raw.recv(size)
        except BlockingIOError:
            return None

    async def wait_readable_first(self) -> bool:
        """Wait until the socket can be read or written, whichever comes first; True: read."""
        readable = False
        raw = self.raw
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                nonlocal readable
                await trio.lowlevel.wait_readable(raw)
                readable = True
                nursery.cancel_scope.cancel()

            async def write() -> None:
                await trio.lowlevel.wait_writable(raw)
                nursery.cancel_scope.cancel()

            nursery.start_soon(read)
            nursery.start_soon(write)
        return readable

    def close_nowait(self) -> None:
        """Last words before the socket closes (TLS: close_notify); nothing for TCP."""


async def drive(s: Session, sock: SocketIO, r: Outcome, *, until_idle: bool) -> bool:
    """Serve session `s` on `sock` from outcome `r` on. Returns True when it is idle (only
    with `until_idle`: the caller takes the socket back), False when it must close. The
    connection counts as busy for a graceful stop except while it waits for input or in a
    blocking command (topicsrv/lifecycle.py Rule 1)."""
    drain = s.ctx.server.drain
    drain.enter()
    delivery = notify.delivery()  # Rule 7
    try:
        return await _drive(s, sock, r, until_idle, drain, delivery)
    finally:
        delivery.done()
        drain.leave()


async def _drive(s: Session, sock: SocketIO, r: Outcome, until_idle: bool, drain: Drain,
                 delivery: notify.Delivery) -> bool:
    while True:
        if r is WAIT_COMMIT:
            await s.wait_commits()
        if s.out:
            if r is CLOSE or r is WAIT_COMMAND or r is YIELD or (r is FLUSH and s.client.paused):
                await _send_all(s, sock)  # this output must go out before anything else
            elif not await _send_some(s, sock):  # Rule 5: the client is not reading yet
                if r is NEED_DATA and await sock.wait_readable_first():
                    data = sock.recv_nowait(READ_SIZE)
                    if data is not None:
                        s.receive_data(data)
                r = s.step()
                continue
        if delivery.held:  # every reply so far is out, a blocked command's one included
            delivery.done()
        if r is NEED_DATA:
            if until_idle:
                return True
            drain.leave()
            try:
                if s.client.pubsub is None:
                    data = await sock.recv(READ_SIZE)
                else:
                    with trio.CancelScope() as woken:  # Rule 6
                        s.wake = woken.cancel
                        data = await sock.recv(READ_SIZE)
                    if woken.cancelled_caught:
                        r = s.step()
                        continue
            finally:
                drain.enter()
            assert data is not None
            s.receive_data(data)
        elif r is WAIT_COMMAND:
            drain.leave()
            try:
                await _wait_command(s, sock)
            finally:
                drain.enter()
        elif r is YIELD:
            await trio.lowlevel.checkpoint()
        elif r is CLOSE:
            return False
        r = s.step()


async def _send_all(s: Session, sock: SocketIO) -> None:
    while s.out:
        with memoryview(s.out)[s.sent_off:] as view:
            n = await sock.send(view)
        s.sent(n)


async def _send_some(s: Session, sock: SocketIO) -> bool:
    """Send what the socket takes now (a checkpoint either way); True when `out` is empty."""
    with memoryview(s.out)[s.sent_off:] as view:
        n = sock.send_nowait(view)
    s.sent(n)
    await trio.lowlevel.checkpoint()
    return not s.out


def _peer_open(sock: SocketIO) -> bool:
    """False once the peer has closed its side (a MSG_PEEK that reads EOF; Rule 7)."""
    raw = getattr(sock, "raw", None)
    if not isinstance(raw, socket.socket):
        return True
    try:
        return bool(raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True
    except OSError:
        return False


async def _wait_command(s: Session, sock: SocketIO) -> None:
    aw = s.start_wait()
    if isinstance(aw, Block) and aw.alive is None:
        aw.alive = lambda: _peer_open(sock)
    result: Any = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_input, s, sock, nursery.cancel_scope)
            result = await aw
            nursery.cancel_scope.cancel()
    except BaseException:
        s.abandon_wait()
        raise
    s.end_wait(result)


async def _watch_input(s: Session, sock: SocketIO,
                       scope: trio.CancelScope) -> None:
    while s.wants_input():
        try:
            data = await sock.recv(READ_SIZE)
        except OSError:
            data = b""
        s.receive_data(data)
        if not data:
            scope.cancel()  # EOF: the wait ends, the connection closes


class Connection:
    def __init__(self, server: ServerContext, front: Front, stream: trio.SocketStream) -> None:
        self.front = front
        sock = self.sock = socket.socket(fileno=stream.socket.detach())  # drive's socket
        sock.setblocking(False)
        self.session = Session(server, front, sock_addr(sock, True), sock_addr(sock, False),
                               sock.fileno())
        self.scope = trio.CancelScope()
        client = self.session.client

        def kill() -> None:
            client.killed = True
            self.scope.cancel()

        client.kill = kill

    async def open_io(self) -> SocketIO | None:
        """The socket interface `drive` serves the session over (None: do not serve);
        TlsConnection (topicsrv/resp/tlsio.py) runs its handshake here."""
        return SocketIO(self.sock)

    async def run(self) -> None:
        s = self.session
        io: SocketIO | None = None
        try:
            with self.scope:
                io = await self.open_io()
                if io is not None:
                    await drive(s, io, NEED_DATA, until_idle=False)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
        except Exception:
            self.front.stats.unexpected_errors += 1
            log.exception("client %d: unexpected error; closing", s.client.id)
        finally:
            if io is not None:
                io.close_nowait()
            s.close()
            trio.lowlevel.notify_closing(self.sock)
            self.sock.close()
