"""The reactor I/O adapter of the RESP front (`resp_io="reactor"`, the default on Linux).

ONE trio task owns an epoll set of every idle RESP socket. It awaits the epoll fd
(`trio.lowlevel.wait_readable`), then serves every ready socket synchronously: non-blocking
`recv`, the session's `step()` (topicsrv/resp/session.py: parse, execute, encode), non-blocking
`send`. A task per connection costs two trio scheduler round trips per request; this path
costs none (docs/performance.md). All session behaviour is in session.py; this module owns
only the sockets, the epoll set and the hand-offs.

Rule 1: the reactor sends the output when a send completes at once, and acts on NEED_DATA
(the socket stays in the epoll set), FLUSH (step again) and CLOSE. Any other outcome, or a
send that would block, hands the connection to a task of its own, which runs
`connection.drive` from that outcome until the session is idle again, then gives the socket
back to the epoll set. A FLUSH whose send came back short is stepped once more before the
hand-off: the session is paused now, and a FLUSH from a paused session means "must go out
first", which a client that writes its whole pipeline before reading would never allow.
Rule 2 (ownership): the reactor runs only synchronous code between two awaits of the epoll
fd, and a socket is either in the epoll set (reactor-owned) or has a task (`_Conn.task`),
never both, so a session is never driven by two tasks at once.
Rule 3: CLIENT KILL closes an idle socket at once and cancels the scope of a connection's
task (the scope exists before the task starts, so a kill in between is not lost).
Rule 4: a bug outside any command costs its connection, never the reactor.
Rule 5 (pub/sub, session Rule 9): a message the bus appends to an idle connection's output
marks it dirty; one flusher task sends the output of every dirty idle connection at its next
turn (the messages of a whole pipelined batch of PUBLISH go out in one send per subscriber)
and hands a connection whose socket would block to a task, as Rule 1. A connection a task
owns sends its own output; one given back with output pending is marked dirty again.
Rule 6 (group commit): a session that is WAIT_COMMIT (replies waiting for their commit
tokens: an fsync-class write) is *parked*, not handed to a task: it stays in the epoll set,
and once the pass over the ready sockets is done, the marks of every session parked in it go
to ONE task that awaits each distinct token once (the WAL groups the frames of the pass into
one batch per shard: wal.py Rule 1), applies the outcome (a failed commit's reply becomes its
error), sends their replies and carries on with each as after FLUSH, synchronously (Rule 2
holds: trio runs one task at a time, and the group's sockets are reactor-owned), like redis-server's
`appendfsync always` (one write + fsync per loop turn, then the replies). Passes overlap:
the reactor serves other sockets while a group's fsync runs. A parked socket that turns
readable is muted (out of the epoll set) until its group is back, so level-triggered epoll
never spins on it (nor on a hang-up) and its input waits in the kernel. The group's task counts as busy
for a graceful stop (lifecycle.py Rule 1); if it is cancelled, its connections are closed.
Rule 7 (replies go out after the pass, as redis-server's beforeSleep): a session that is idle
again after its step (NEED_DATA) with replies to send is queued, and the replies of the whole
pass (or of a commit group's resume) are sent after it, one send per socket as before, so a
client is not woken once per reply while the pass is still running. Every other outcome sends
at once, as Rule 1 says. (Measured alone at P1 it was within noise: docs/performance.md.)
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Awaitable, Callable

import trio

from topicsrv.context import ServerContext
from topicsrv.resp.awaits import Mark, apply_outcome, wait_tokens
from topicsrv.resp.awaits import Outcome as TokenOutcome
from topicsrv.resp.commands.base import Front
from topicsrv.resp.connection import READ_SIZE, SocketIO, drive, sock_addr
from topicsrv.resp.session import CLOSE, FLUSH, NEED_DATA, WAIT_COMMIT, Outcome, Session

log = logging.getLogger("topicsrv.resp")


def available() -> bool:
    return hasattr(select, "epoll")


class _Conn:
    __slots__ = ("sock", "fd", "session", "task", "scope", "closed", "parked", "muted")

    def __init__(self, sock: socket.socket, session: Session) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.session = session
        self.task = False  # True while a task (not the reactor) drives the connection
        self.scope: trio.CancelScope | None = None
        self.closed = False
        self.parked = False  # waiting for its group's commit (Rule 6)
        self.muted = False  # parked and readable: out of the epoll set until unparked


class Reactor:
    def __init__(self, server: ServerContext, front: Front, nursery: trio.Nursery) -> None:
        self.server = server
        self.front = front
        self.nursery = nursery
        self.ep = select.epoll()
        self.conns: dict[int, _Conn] = {}
        self.dirty: dict[_Conn, None] = {}  # idle connections with pub/sub output (Rule 5)
        self.flush_due = trio.Event()

        self.parked: list[_Conn] = []  # parked in the current pass (Rule 6)
        self.sends: list[_Conn] = []  # idle with replies to send after the pass (Rule 7)

    # ---- ownership ------------------------------------------------------------------------

    def adopt(self, sock: socket.socket) -> None:
        """Take a freshly accepted socket (non-blocking from here on)."""
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        s = Session(self.server, self.front, sock_addr(sock, True), sock_addr(sock, False),
                    sock.fileno())
        c = _Conn(sock, s)

        def kill() -> None:
            s.client.killed = True
            if not c.task:
                self._close(c)
            elif c.scope is not None:
                c.scope.cancel()

        s.client.kill = kill
        s.wake = lambda: self._wake(c)
        self.conns[c.fd] = c
        self.ep.register(c.fd, select.EPOLLIN)

    def _close(self, c: _Conn) -> None:
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
        c.session.close()
        c.sock.close()

    def _hand_off(self, c: _Conn, r: Outcome) -> None:
        self.ep.unregister(c.fd)
        c.task = True
        c.scope = trio.CancelScope()
        self.nursery.start_soon(self._drive, c, r)

    def _take_back(self, c: _Conn) -> None:
        c.task = False
        c.scope = None
        self.ep.register(c.fd, select.EPOLLIN)
        if c.session.out:  # output appended after the task's last send (Rule 5)
            self._wake(c)

    # ---- pub/sub output (Rule 5) ----------------------------------------------------------

    def _wake(self, c: _Conn) -> None:
        if not c.closed:
            self.dirty[c] = None
            self.flush_due.set()

    async def flush_pushes(self) -> None:
        while True:
            await self.flush_due.wait()
            self.flush_due = trio.Event()
            dirty, self.dirty = self.dirty, {}
            for c in dirty:
                if not c.task and not c.closed and c.session.out:
                    try:
                        self._push_out(c)
                    except Exception:  # Rule 4
                        self.front.stats.unexpected_errors += 1
                        log.exception("client %d: unexpected error; closing",
                                      c.session.client.id)
                        self._close(c)

    def _push_out(self, c: _Conn) -> None:
        if self._send_now(c) and c.session.out:  # the socket buffer is full: a task sends
            self._hand_off(c, NEED_DATA)  # the rest as the client reads (Rule 1)

    def _send_now(self, c: _Conn) -> bool:
        """Send what the socket takes at once; False when that closed the connection. A
        reactor-owned session's output starts at 0 (a partial send hands it to a task)."""
        s = c.session
        try:
            n = c.sock.send(s.out)
        except BlockingIOError:
            n = 0
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
            self._close(c)
            return False
        s.sent(n)
        return True

    # ---- the reactor task -----------------------------------------------------------------

    async def run(self) -> None:
        ep, conns = self.ep, self.conns
        try:
            while True:
                await trio.lowlevel.wait_readable(ep.fileno())
                for fd, _ in ep.poll(0, 1024):
                    c = conns.get(fd)
                    if c is None or c.task or c.closed:
                        continue
                    if c.parked:
                        c.muted = True  # out of the set until its group is back: no spin,
                        ep.unregister(fd)  # not even on EPOLLHUP, which no mask keeps out
                        continue
                    try:
                        self._readable(c)
                    except Exception:
                        self._bug(c)
                if self.sends:
                    self._send_queued()
                if self.parked:
                    self._commit_group()
        finally:
            for c in list(conns.values()):
                if not c.task:
                    self._close(c)
            ep.close()

    def _bug(self, c: _Conn) -> None:
        """A bug outside any command costs its connection, not the front (Rule 4)."""
        self.front.stats.unexpected_errors += 1
        log.exception("client %d: unexpected error; closing", c.session.client.id)
        if not c.task:
            self._close(c)

    def _readable(self, c: _Conn) -> None:
        sock, s = c.sock, c.session
        try:
            data = sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
            data = b""
        s.receive_data(data)
        self._run(c, s.step())

    def _run(self, c: _Conn, r: Outcome) -> None:
        s = c.session
        while r is not WAIT_COMMIT:
            if s.out:
                if r is NEED_DATA:  # sent after the pass (Rule 7)
                    self.sends.append(c)
                    return
                if not self._send_now(c):
                    return
                if s.out:  # the socket buffer is full: a task takes over (Rule 1)
                    if r is FLUSH:  # only "the buffer reached FLUSH_AT": now paused, the
                        r = s.step()  # session decides again (session Rule 2b)
                    break
            if r is NEED_DATA:
                return
            if r is not FLUSH:
                break
            r = s.step()
        if r is WAIT_COMMIT:
            c.parked = True
            self.parked.append(c)
            return
        if r is CLOSE and not s.out:
            self._close(c)
            return
        self._hand_off(c, r)

    def _send_queued(self) -> None:
        """Rule 7: send the replies of the sessions that went idle in this pass; a socket that
        does not take them all is handed to a task (Rule 1)."""
        sends, self.sends = self.sends, []
        for c in sends:
            if c.closed or c.task or not c.session.out:  # killed, or already sent (Rule 5)
                continue
            try:
                if self._send_now(c) and c.session.out:
                    self._hand_off(c, NEED_DATA)
            except Exception:
                self._bug(c)

    # ---- group commit (Rule 6) ------------------------------------------------------------

    def _commit_group(self) -> None:
        group = [(c, c.session.take_marks()) for c in self.parked]
        self.parked = []
        self.nursery.start_soon(self._settle, group)

    async def _settle(self, group: list[tuple[_Conn, list[Mark]]]) -> None:
        drain = self.server.drain
        drain.enter()
        outcome: TokenOutcome = {}
        try:
            for _, marks in group:
                await wait_tokens(marks, outcome, self.front)
        except BaseException:  # cancelled (shutdown): these replies will never be sent
            for c, _ in group:
                c.parked = False
                if not c.closed:
                    self._close(c)
            raise
        finally:
            drain.leave()
        self._resume(group, outcome)

    def _resume(self, group: list[tuple[_Conn, list[Mark]]], outcome: TokenOutcome) -> None:
        """Serve the sessions whose group is durable: their replies, then on as after FLUSH.
        Runs in the group's task, synchronously: between two awaits the reactor's sockets
        are only ever served by one piece of code at a time (trio runs one task at once)."""
        for c, marks in group:
            c.parked = False
            if c.closed:
                continue
            apply_outcome(marks, c.session.out, outcome)
            if c.closed:
                continue
            if c.muted:
                c.muted = False
                self.ep.register(c.fd, select.EPOLLIN)
            try:
                self._run(c, FLUSH)
            except Exception:
                self._bug(c)
        if self.sends:
            self._send_queued()
        if self.parked:  # sessions that ran more input and wait again: the next group
            self._commit_group()

    # ---- the connection's task while it waits ---------------------------------------------

    async def _drive(self, c: _Conn, r: Outcome) -> None:
        s = c.session
        scope = c.scope
        assert scope is not None
        idle = False
        try:
            with scope:
                idle = await drive(s, SocketIO(c.sock), r, until_idle=True)
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
        except Exception:  # a bug outside any command (dispatch guards those): one connection
            self.front.stats.unexpected_errors += 1
            log.exception("client %d: unexpected error; closing", s.client.id)
        except BaseException:  # shutdown (an outer cancel): never leak the socket
            self._close_from_task(c)
            raise
        if idle and not scope.cancel_called and not s.client.killed:
            self._take_back(c)
        else:
            self._close_from_task(c)

    def _close_from_task(self, c: _Conn) -> None:
        trio.lowlevel.notify_closing(c.sock)
        self._close(c)


async def serve_reactor(server: ServerContext, front: Front, nursery: trio.Nursery,
                        accept: Callable[[Callable[[trio.SocketStream], Awaitable[None]]],
                                         Awaitable[None]]) -> None:
    """Hand every socket `accept` admits to one Reactor."""
    reactor = Reactor(server, front, nursery)

    async def handle(stream: trio.SocketStream) -> None:
        fd = stream.socket.detach()
        reactor.adopt(socket.socket(fileno=fd))

    nursery.start_soon(reactor.run)
    nursery.start_soon(reactor.flush_pushes)
    await accept(handle)
