"""The reactor's synchronous pass over its ready sockets (topicsrv/resp/reactor.py), compiled.

Everything the reactor does between two awaits of its epoll fd, per ready socket: the
non-blocking `recv`, the session's `step()`, the sends after the pass. It is compiled with the
rest of the hot path (topicsrv/buildinfo.py) because at P1 this is most of what a request costs
outside the session itself: interpreted, it was ~1.5 µs of every request's ~9 µs
(docs/performance.md, "The reactor's pass, compiled").

Rule 1: the rules are reactor.py's (1, 2, 4, 6 and 7); this module holds the part of them that
needs no trio: the reactor hands `Pump` the events of one `epoll.poll`, and `Pump` calls back
`hand_off(conn, outcome)` for a connection that needs a task of its own (reactor Rule 1); it
never awaits, starts a task or touches trio.
Rule 2: a socket here is only ever used non-blocking (`recv`, `send`); a call that would
block is an outcome, never a wait.
Rule 3: a bug outside any command costs its connection, never the pass (reactor Rule 4).
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Callable
from typing import Any, Final

from topicsrv.resp.session import CLOSE, FLUSH, NEED_DATA, WAIT_COMMIT, Outcome, Session

log: Final = logging.getLogger("topicsrv.resp")

READ_SIZE: Final = 64 * 1024  # one recv, on both I/O paths (connection.py uses it too)


class Conn:
    """One socket of the reactor and its session."""

    def __init__(self, sock: socket.socket, session: Session) -> None:
        self.sock = sock
        self.fd: int = sock.fileno()
        self.session = session
        self.task = False  # True while a task (not the reactor) drives the connection
        self.scope: Any = None  # the task's trio.CancelScope (reactor Rule 3)
        self.closed = False
        self.parked = False  # waiting for its group's commit (reactor Rule 6)
        self.muted = False  # parked and readable: out of the epoll set until unparked


def _no_hand_off(c: Conn, r: Outcome) -> None:
    raise RuntimeError("the reactor did not set Pump.hand_off")


class Pump:
    """The synchronous state of a reactor: its epoll set, its connections, the sessions to
    send to after the pass (reactor Rule 7) and the ones parked for a group commit (Rule 6)."""

    def __init__(self, ep: select.epoll, front: Any) -> None:
        self.ep = ep
        self.front = front
        self.conns: dict[int, Conn] = {}
        self.sends: list[Conn] = []  # idle with replies to send after the pass (Rule 7)
        self.parked: list[Conn] = []  # parked in the current pass (Rule 6)
        self.hand_off: Callable[[Conn, Outcome], None] = _no_hand_off

    def serve(self, events: list[tuple[int, int]]) -> None:
        """One pass: every ready socket, then the replies of the pass (reactor Rule 7)."""
        conns, ep = self.conns, self.ep
        for fd, _ in events:
            c = conns.get(fd)
            if c is None or c.task or c.closed:
                continue
            if c.parked:
                c.muted = True  # out of the set until its group is back: no spin,
                ep.unregister(fd)  # not even on EPOLLHUP, which no mask keeps out
                continue
            try:
                self.readable(c)
            except Exception:
                self.bug(c)
        if self.sends:
            self.send_queued()

    def readable(self, c: Conn) -> None:
        s = c.session
        try:
            data = c.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
            data = b""
        s.receive_data(data)
        self.run(c, s.step())

    def run(self, c: Conn, r: Outcome) -> None:
        """Act on a step's outcome (reactor Rule 1)."""
        s = c.session
        while r is not WAIT_COMMIT:
            if s.out:
                if r is NEED_DATA:  # sent after the pass (Rule 7)
                    self.sends.append(c)
                    return
                if not self.send_now(c):
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
            self.close(c)
            return
        self.hand_off(c, r)

    def send_now(self, c: Conn) -> bool:
        """Send what the socket takes at once; False when that closed the connection. A
        reactor-owned session's output starts at 0 (a partial send hands it to a task)."""
        s = c.session
        try:
            n = c.sock.send(s.out)
        except BlockingIOError:
            n = 0
        except OSError as e:
            log.debug("client %d: %s", s.client.id, e)
            self.close(c)
            return False
        s.sent(n)
        return True

    def send_queued(self) -> None:
        """Rule 7: send the replies of the sessions that went idle in this pass; a socket that
        does not take them all is handed to a task (Rule 1)."""
        sends, self.sends = self.sends, []
        for c in sends:
            if c.closed or c.task or not c.session.out:  # killed, or already sent (Rule 5)
                continue
            try:
                if self.send_now(c) and c.session.out:
                    self.hand_off(c, NEED_DATA)
            except Exception:
                self.bug(c)

    def close(self, c: Conn) -> None:
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

    def bug(self, c: Conn) -> None:
        """A bug outside any command costs its connection, not the front (Rule 3)."""
        self.front.stats.unexpected_errors += 1
        log.exception("client %d: unexpected error; closing", c.session.client.id)
        if not c.task:
            self.close(c)
