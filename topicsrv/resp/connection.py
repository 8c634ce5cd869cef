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
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from topicsrv.context import ServerContext
from topicsrv.resp.commands.base import Front
from topicsrv.resp.session import (
    CLOSE,
    NEED_DATA,
    WAIT_COMMAND,
    WAIT_COMMIT,
    YIELD,
    Outcome,
    Session,
)

log = logging.getLogger("topicsrv.resp")

READ_SIZE = 64 * 1024


def sock_addr(sock: Any, peer: bool) -> str:
    try:
        host, port = (sock.getpeername() if peer else sock.getsockname())[:2]
        return f"{host}:{port}"
    except OSError:
        return "?:0"


async def drive(s: Session, sock: trio.socket.SocketType, r: Outcome, *,
                until_idle: bool) -> bool:
    """Serve session `s` on `sock` from outcome `r` on. Returns True when it is idle (only
    with `until_idle`: the caller takes the socket back), False when it must close."""
    while True:
        if r is WAIT_COMMIT:
            await s.wait_commits()
        if s.out:
            await _send(s, sock)
        if r is NEED_DATA:
            if until_idle:
                return True
            s.receive_data(await sock.recv(READ_SIZE))
        elif r is WAIT_COMMAND:
            await _wait_command(s, sock)
        elif r is YIELD:
            await trio.lowlevel.checkpoint()
        elif r is CLOSE:
            return False
        r = s.step()


async def _send(s: Session, sock: trio.socket.SocketType) -> None:
    while s.out:
        with memoryview(s.out)[s.sent_off:] as view:
            n = await sock.send(view)
        s.sent(n)


async def _wait_command(s: Session, sock: trio.socket.SocketType) -> None:
    aw = s.start_wait()
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


async def _watch_input(s: Session, sock: trio.socket.SocketType,
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
        self.stream = stream
        self.front = front
        sock = stream.socket
        self.session = Session(server, front, sock_addr(sock, True), sock_addr(sock, False),
                               sock.fileno())
        self.scope = trio.CancelScope()
        client = self.session.client

        def kill() -> None:
            client.killed = True
            self.scope.cancel()

        client.kill = kill

    async def run(self) -> None:
        s = self.session
        try:
            with self.scope:
                await drive(s, self.stream.socket, NEED_DATA, until_idle=False)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
        except Exception:
            self.front.stats.unexpected_errors += 1
            log.exception("client %d: unexpected error; closing", s.client.id)
        finally:
            s.close()
            await trio.aclose_forcefully(self.stream)
