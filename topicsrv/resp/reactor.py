"""The reactor I/O path of the RESP front (`resp_io="reactor"`, the default on Linux).

ONE trio task owns an epoll set of every idle RESP socket. It awaits the epoll fd
(`trio.lowlevel.wait_readable`), then serves every ready socket synchronously: non-blocking
`recv`, parse, execute, encode, non-blocking `send`. A task per connection costs two trio
scheduler round trips per request; this path costs none (docs/performance.md).

A connection leaves the epoll set and gets its own task (`_drive`) only while it must wait:
a blocking command (XREAD/XREADGROUP BLOCK), commit tokens of fsync-gated writes (`Pending`),
or a send that would block (output back-pressure). The task finishes the batch exactly as the
task-per-connection loop (topicsrv/resp/connection.py) would, then hands the socket back.

Rule 1 (pipelining): every complete frame of a read is executed in order before the next
read; the replies go out with one send per flush (a flush also happens when the pending
output passes FLUSH_AT, and before a blocking command waits).
Rule 2 (bounded output): while output is pending the socket is out of the epoll set, so a
client that does not read is paused (events=w in CLIENT LIST); a single reply larger than
`client_output_limit` is refused with an error (dispatch Rule 4), and a batch that still
outgrows it disconnects the client.
Rule 3 (blocking): while a command blocks, input is watched: EOF cancels the wait and closes,
bytes that arrive are kept (bounded) for after the wait. CLIENT KILL closes an idle socket at
once and cancels a connection's task.
Rule 4: a run of plain `XADD key * ...` to one key in a read is one engine write
(topicsrv/resp/batch.py), each command still answered on its own.
Rule 5: a protocol error replies `-ERR Protocol error: ...` and closes, like redis-server.
Rule 6: the reactor only ever runs synchronous code between two awaits of the epoll fd, so
connection state is never touched by two tasks at once: a socket is either in the epoll set
(reactor-owned) or has a task (`Conn.task`), never both.
"""

from __future__ import annotations

import inspect
import logging
import select
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from topicsrv.context import ServerContext
from topicsrv.resp.batch import run_xadds
from topicsrv.resp.commands.base import CommandContext, Front
from topicsrv.resp.connection import FLUSH_AT, READ_SIZE, STASH_MAX, _addr
from topicsrv.resp.dispatch import emit, execute, over_output_limit, settle
from topicsrv.resp.encoder import encode_error
from topicsrv.resp.protocol import RequestParser

log = logging.getLogger("topicsrv.resp")

_FLUSH = object()  # _run: the output passed FLUSH_AT


def available() -> bool:
    return hasattr(select, "epoll")


class _Closed(Exception):
    pass


class Conn:
    __slots__ = ("sock", "fd", "client", "ctx", "parser", "limit", "cmds", "pos", "err", "out",
                 "marks", "stash", "eof", "closing", "task", "scope", "closed")

    def __init__(self, server: ServerContext, front: Front, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        client = front.new_client(_addr(sock, True), _addr(sock, False))
        client.fd = self.fd
        client.authenticated = not server.config.requirepass
        self.client = client
        self.ctx = CommandContext(server, client, front)
        self.parser = RequestParser(server.config.proto_max_bulk_len, client.authenticated)
        self.limit = server.config.client_output_limit
        self.cmds: list[list[bytes]] = []
        self.pos = 0
        self.err: str | None = None  # protocol error to report once cmds are done
        self.out = bytearray()
        self.marks: list[tuple[Any, int, int]] = []  # (commit token, reply start, end) in out
        self.stash: list[bytes] = []
        self.eof = False
        self.closing = False  # close once the output is flushed (QUIT, protocol error)
        self.task = False  # True while a task (not the reactor) drives the connection
        self.scope: trio.CancelScope | None = None
        self.closed = False


class Reactor:
    def __init__(self, server: ServerContext, front: Front, nursery: trio.Nursery) -> None:
        self.server = server
        self.front = front
        self.nursery = nursery
        self.ep = select.epoll()
        self.conns: dict[int, Conn] = {}

    # ---- ownership ------------------------------------------------------------------------

    def adopt(self, sock: socket.socket) -> None:
        """Take a freshly accepted socket (non-blocking from here on)."""
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        c = Conn(self.server, self.front, sock)

        def kill() -> None:
            c.client.killed = True
            if c.task:
                if c.scope is not None:
                    c.scope.cancel()
            else:
                self._close(c)

        c.client.kill = kill
        self.conns[c.fd] = c
        self.ep.register(c.fd, select.EPOLLIN)

    def _close(self, c: Conn) -> None:
        if c.closed:
            return
        c.closed = True
        if not c.task:
            try:
                self.ep.unregister(c.fd)
            except (OSError, ValueError):
                pass
        if self.conns.get(c.fd) is c:
            del self.conns[c.fd]
        self.front.clients.pop(c.client.id, None)
        c.sock.close()

    def _hand_off(self, c: Conn, waiting: Any) -> None:
        self.ep.unregister(c.fd)
        c.task = True
        self.nursery.start_soon(self._drive, c, waiting)

    def _take_back(self, c: Conn) -> None:
        c.task = False
        c.scope = None
        self.ep.register(c.fd, select.EPOLLIN)

    # ---- the reactor task -----------------------------------------------------------------

    async def run(self) -> None:
        ep, conns = self.ep, self.conns
        try:
            while True:
                await trio.lowlevel.wait_readable(ep.fileno())
                for fd, _ in ep.poll(0, 1024):
                    c = conns.get(fd)
                    if c is not None and not c.task and not c.closed:
                        try:
                            self._readable(c)
                        except Exception:  # a bug must cost one connection, not the front
                            self.front.stats.unexpected_errors += 1
                            log.exception("client %d: unexpected error; closing", c.client.id)
                            if not c.task:
                                self._close(c)
        finally:
            for c in list(conns.values()):
                if not c.task:
                    self._close(c)
            ep.close()

    def _readable(self, c: Conn) -> None:
        try:
            data = c.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            log.debug("client %d: %s", c.client.id, e)
            data = b""
        if not data:
            self._close(c)
            return
        self.front.stats.net_input_bytes += len(data)
        self._feed(c, data)
        try:
            while True:
                r = self._run(c)
                if r is None:
                    if c.out or c.marks:
                        if not self._send_now(c):
                            self._hand_off(c, None)
                            return
                    if c.closing:
                        self._close(c)
                    return
                if r is _FLUSH:
                    if not self._send_now(c):
                        self._hand_off(c, None)
                        return
                    continue
                self._hand_off(c, r)
                return
        except _Closed:
            self._close(c)

    # ---- shared by the reactor and the per-connection task -----------------------------------

    def _feed(self, c: Conn, data: bytes) -> None:
        cmds, err = c.parser.feed(data)
        if cmds:
            c.client.last_interaction = time.monotonic()
        c.cmds, c.pos, c.err = cmds, 0, err

    def _run(self, c: Conn) -> Any:
        """Execute c.cmds from c.pos: None when the batch is done, _FLUSH when the output
        must be flushed first, or the awaitable of a command that blocks."""
        client, ctx, out, cmds = c.client, c.ctx, c.out, c.cmds
        n = len(cmds)
        while c.pos < n:
            argv = cmds[c.pos]
            if len(argv) >= 5 and argv[2] == b"*" and n - c.pos > 1:
                replies = run_xadds(ctx, cmds, c.pos)
                if replies is not None:
                    c.pos += len(replies)
                    self._emit_all(c, replies)
                    if len(out) >= FLUSH_AT:
                        return _FLUSH
                    continue
            c.pos += 1
            reply = execute(ctx, argv)
            if inspect.isawaitable(reply):
                return reply
            self._emit(c, reply)
            if client.close_after_reply:
                c.closing = True
                c.pos = n
                return None
            if len(out) >= FLUSH_AT:
                return _FLUSH
        c.parser.authenticated = client.authenticated
        if c.err is not None:
            encode_error(out, f"ERR {c.err}")
            log.info("client %d (%s): %s; closing", client.id, client.addr, c.err)
            c.err = None
            c.closing = True
        return None

    def _emit(self, c: Conn, reply: Any) -> None:
        emit(c.out, c.marks, reply, c.client.protocol == 3, c.ctx)

    def _emit_all(self, c: Conn, replies: list[Any]) -> None:
        for reply in replies:
            self._emit(c, reply)

    def _check_limit(self, c: Conn) -> None:
        if over_output_limit(self.front.stats, c.client, len(c.out), c.limit):
            raise _Closed

    def _send_now(self, c: Conn) -> bool:
        """Send the output without waiting; False when the rest needs a task (commit tokens
        to wait for, or a socket buffer that is full)."""
        self._check_limit(c)
        if c.marks:
            return False
        out = c.out
        try:
            sent = c.sock.send(out)
        except BlockingIOError:
            sent = 0
        except OSError as e:
            log.debug("client %d: %s", c.client.id, e)
            raise _Closed from None
        self.front.stats.net_output_bytes += sent
        if sent == len(out):
            out.clear()
            return True
        del out[:sent]
        return False

    # ---- the per-connection task ----------------------------------------------------------

    async def _drive(self, c: Conn, waiting: Any) -> None:
        scope = c.scope = trio.CancelScope()
        try:
            with scope:
                while True:
                    if waiting is not None:
                        if c.out or c.marks:
                            await self._flush(c)
                        reply = await self._blocking(c, waiting)
                        waiting = None
                        self._emit(c, reply)
                        if len(c.out) >= FLUSH_AT:
                            await self._flush(c)
                    r = self._run(c)
                    if r is _FLUSH:
                        await self._flush(c)
                        continue
                    if r is not None:
                        waiting = r
                        continue
                    if c.out or c.marks:
                        await self._flush(c)
                    if c.closing:
                        raise _Closed
                    if c.stash:
                        data = b"".join(c.stash)
                        c.stash.clear()
                        self._feed(c, data)
                        continue
                    break
        except (_Closed, OSError) as e:
            if isinstance(e, OSError):
                log.debug("client %d: %s", c.client.id, e)
            self._close_from_task(c)
            return
        except Exception:  # a bug outside any command (dispatch guards those): one connection
            self.front.stats.unexpected_errors += 1
            log.exception("client %d: unexpected error; closing", c.client.id)
            self._close_from_task(c)
            return
        except BaseException:  # shutdown (an outer cancel): never leak the socket
            self._close_from_task(c)
            raise
        if scope.cancelled_caught or c.client.killed:
            self._close_from_task(c)
            return
        self._take_back(c)

    def _close_from_task(self, c: Conn) -> None:
        trio.lowlevel.notify_closing(c.sock)
        self._close(c)

    async def _flush(self, c: Conn) -> None:
        self._check_limit(c)
        if c.marks:
            marks, c.marks = c.marks, []
            await settle(marks, c.out, self.front)
        client, out = c.client, c.out
        client.out_pending = len(out)
        client.paused = True
        try:
            view = memoryview(out)
            done = 0
            try:
                while done < len(view):
                    try:
                        sent = c.sock.send(view[done:])
                    except BlockingIOError:
                        await trio.lowlevel.wait_writable(c.sock)
                        continue
                    done += sent
                    self.front.stats.net_output_bytes += sent
                    client.out_pending = len(view) - done
            finally:
                view.release()
        finally:
            client.paused = False
            client.out_pending = 0
        out.clear()

    async def _blocking(self, c: Conn, reply: Any) -> Any:
        """Await a blocking handler while watching the input for EOF."""
        client = c.client
        client.blocked = True
        result: Any = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_input, c, nursery.cancel_scope)
                result = await reply
                nursery.cancel_scope.cancel()
        finally:
            client.blocked = False
        if c.eof:
            raise _Closed
        return result

    async def _watch_input(self, c: Conn, scope: trio.CancelScope) -> None:
        size = 0
        while size < STASH_MAX:
            await trio.lowlevel.wait_readable(c.sock)
            try:
                data = c.sock.recv(READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                c.eof = True
                scope.cancel()
                return
            self.front.stats.net_input_bytes += len(data)
            c.stash.append(data)
            size += len(data)


async def serve_reactor(server: ServerContext, front: Front, nursery: trio.Nursery,
                        accept: Callable[[Callable[[trio.SocketStream], Awaitable[None]]],
                                         Awaitable[None]]) -> None:
    """Hand every socket `accept` admits to one Reactor."""
    reactor = Reactor(server, front, nursery)

    async def handle(stream: trio.SocketStream) -> None:
        fd = stream.socket.detach()
        reactor.adopt(socket.socket(fileno=fd))

    nursery.start_soon(reactor.run)
    await accept(handle)
