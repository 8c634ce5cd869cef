"""The reactor I/O adapter of the RESP front (`resp_io="reactor"`, the default on Linux).

ONE trio task owns an epoll set of every idle RESP socket. It awaits the epoll fd
(`trio.lowlevel.wait_readable`), then serves every ready socket synchronously: non-blocking
`recv`, the session's `step()` (topicsrv/resp/session.py: parse, execute, encode), non-blocking
`send`. A task per connection costs two trio scheduler round trips per request; this path
costs none (docs/performance.md). All session behaviour is in session.py; this module owns
only the sockets, the epoll set and the hand-offs, and the synchronous pass over the ready
sockets is topicsrv/resp/pump.py (compiled: Rules 1, 2, 4, 6 and 7 are carried out there).

Rule 1: the reactor sends the output when a send completes at once, and acts on NEED_DATA
(the socket stays in the epoll set), FLUSH (step again) and CLOSE. Any other outcome, or a
send that would block, hands the connection to a task of its own, which runs
`connection.drive` from that outcome until the session is idle again, then gives the socket
back to the epoll set. A FLUSH whose send came back short is stepped once more before the
hand-off: the session is paused now, and a FLUSH from a paused session means "must go out
first", which a client that writes its whole pipeline before reading would never allow.
Rule 2 (ownership): the reactor runs only synchronous code between two awaits of the epoll
fd, and a socket is either in the epoll set (reactor-owned) or has a task (`Conn.task`),
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
at once, as Rule 1 says. (Measured: PING P1's system time per request 6.4-6.8 -> 4.9-5.7 µs,
docs/performance.md; its throughput is the client's and did not move.)
Rule 8 (a turn of up to PASSES passes): once the epoll fd is readable, the reactor serves what
is ready, then polls again at once and serves what came in meanwhile (the requests of the
clients its last pass answered), up to PASSES passes, before it gives trio its turn back: under
load a trio round trip per pass (~6 µs) is saved twice in three, and the other tasks (group
commits, the WAL writers, the pub/sub flusher) still run at least once every PASSES passes.
Rule 9 (blocked clients have no task): a command that blocks with a `Block` (XREAD/XREADGROUP
BLOCK, TOPIC.CLAIM BLOCK: topicsrv/notify/blocks.py) once its output is out is *parked*: the
socket stays in the epoll set, input that comes meanwhile is kept by the session (muted once
the session wants no more), EOF abandons the wait and closes. The notifier serves the Block
at the end of the pass that made it ready, in the reactor's task (the pass holds the
notifier's runner and flushes it); its `on_done` resumes the session synchronously (the reply, then whatever input was kept) and
sends, and the Block's turn ends once its reply has gone out (`turns`: at once, or when the
group commit or the task the connection went to has sent it). Before an attempt the Block
asks whether the client is still there (`_alive`: a MSG_PEEK that sees EOF closes the
connection), so nothing is served to a client that left.
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Awaitable, Callable
from functools import partial

import trio

from topicsrv.context import ServerContext
from topicsrv.notify.blocks import Block
from topicsrv.notify.waiter import NOTHING, Waiter
from topicsrv.resp.awaits import Mark, apply_outcome, wait_tokens
from topicsrv.resp.awaits import Outcome as TokenOutcome
from topicsrv.resp.commands.base import Front
from topicsrv.resp.connection import SocketIO, drive, sock_addr
from topicsrv.resp.pump import Conn, Pump
from topicsrv.resp.session import FLUSH, NEED_DATA, WAIT_COMMAND, Outcome, Session

log = logging.getLogger("topicsrv.resp")

PASSES = 3  # passes over the ready sockets per turn of the trio scheduler (Rule 8)


def available() -> bool:
    return hasattr(select, "epoll")


class Reactor:
    def __init__(self, server: ServerContext, front: Front, nursery: trio.Nursery) -> None:
        self.server = server
        self.front = front
        self.nursery = nursery
        self.ep = select.epoll()
        self.pump = Pump(self.ep, front)  # the synchronous pass, compiled (pump.py)
        self.pump.hand_off = self._hand_off
        self.conns: dict[int, Conn] = self.pump.conns
        self.dirty: dict[Conn, None] = {}  # idle connections with pub/sub output (Rule 5)
        self.flush_due = trio.Event()
        self.flush_set = False  # flush_due is set (saves its call per delivery)
        self.turns: dict[Conn, Waiter] = {}  # served Blocks whose reply is not out yet (Rule 9)

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
        c = Conn(sock, s)

        def kill() -> None:
            s.client.killed = True
            if not c.task:
                self._close(c)
            elif c.scope is not None:
                c.scope.cancel()

        s.client.kill = kill
        s.wake = partial(self._wake, c)  # no frame of its own: called once per delivery
        self.conns[c.fd] = c
        self.ep.register(c.fd, select.EPOLLIN)

    def _close(self, c: Conn) -> None:
        self.pump.close(c)
        self._settle_turn(c)

    def _hand_off(self, c: Conn, r: Outcome) -> None:
        if r is WAIT_COMMAND and not c.session.out and isinstance(c.session.hold, Block):
            self._park(c)  # Rule 9
            return
        if c.muted:  # a parked Block's connection whose kept input reached the limit:
            c.muted = False  # already out of the set
        else:
            self.ep.unregister(c.fd)
        c.task = True
        c.scope = trio.CancelScope()
        self.nursery.start_soon(self._drive, c, r)

    def _take_back(self, c: Conn) -> None:
        c.task = False
        c.scope = None
        self.ep.register(c.fd, select.EPOLLIN)
        if c.session.out:  # output appended after the task's last send (Rule 5)
            self._wake(c)
        hold = c.session.hold
        if isinstance(hold, Block) and hold.result is not NOTHING and not hold.closed:
            self._unpark(c, hold)  # it was served while a task sent pushed output (Rule 9)

    # ---- blocked clients (Rule 9) ---------------------------------------------------------

    def _park(self, c: Conn) -> None:
        s = c.session
        block = s.hold
        assert isinstance(block, Block)
        if s.eof:  # the client left while blocked (session Rule 3)
            s.abandon_wait()
            self._close(c)
            return
        if not s.client.blocked:
            s.start_wait()
            block.attach(lambda: self._unpark(c, block), lambda: self._alive(c))
        if not s.wants_input() and not c.muted:  # kept input at its limit: read no more
            c.muted = True
            self.ep.unregister(c.fd)

    def _unpark(self, c: Conn, block: Block) -> None:
        """The Block has its result (the notifier's runner calls this): resume and send."""
        s = c.session
        if c.closed or c.task or s.hold is not block:
            return
        if c.muted:
            c.muted = False
            self.ep.register(c.fd, select.EPOLLIN)
        pump = self.pump
        s.end_wait(block.hand())
        self.turns[c] = block
        try:
            pump.run(c, s.step())
        except Exception:  # Rule 4
            pump.bug(c)
        if pump.sends:
            pump.send_queued()
        if pump.parked:
            self._commit_group()
        self._settle_turn(c)

    def _settle_turn(self, c: Conn) -> None:
        """A served Block's turn ends once its reply is out (or the connection is gone)."""
        w = self.turns.get(c)
        if w is not None and (c.closed or (not c.task and not c.parked and not c.session.out)):
            del self.turns[c]
            w.delivered()

    def _alive(self, c: Conn) -> bool:
        """Rule 9: False (and the connection closed) once the client has gone."""
        if c.closed:
            return False
        try:
            if c.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                return True
        except BlockingIOError:
            return True
        except OSError:
            pass
        s = c.session
        s.receive_data(b"")
        s.abandon_wait()
        self._close(c)
        return False

    # ---- pub/sub output (Rule 5) ----------------------------------------------------------

    def _wake(self, c: Conn) -> None:
        if not c.closed:
            self.dirty[c] = None
            if not self.flush_set:  # a publish to fifty subscribers sets the event once
                self.flush_set = True
                self.flush_due.set()

    async def flush_pushes(self) -> None:
        while True:
            await self.flush_due.wait()
            self.flush_due = trio.Event()
            self.flush_set = False
            dirty, self.dirty = self.dirty, {}
            for c in dirty:
                if not c.task and not c.closed and c.session.out:
                    try:
                        self._push_out(c)
                    except Exception:  # Rule 4
                        self.pump.bug(c)

    def _push_out(self, c: Conn) -> None:
        if self.pump.send_now(c) and c.session.out:  # the socket buffer is full: a task sends
            self._hand_off(c, NEED_DATA)  # the rest as the client reads (Rule 1)

    # ---- the reactor task -----------------------------------------------------------------

    async def run(self) -> None:
        ep, pump = self.ep, self.pump
        runner = self.server.notifier.runner
        try:
            while True:
                await trio.lowlevel.wait_readable(ep.fileno())
                for _ in range(PASSES):  # Rule 8
                    events = ep.poll(0, 1024)
                    if not events:
                        break
                    runner.hold += 1  # the pass is one step (Rule 9; notify/runner.py Rule 1b)
                    try:
                        pump.serve(events)
                    finally:
                        runner.hold -= 1
                    if pump.parked:
                        self._commit_group()
                    runner.flush()
        finally:
            for c in list(pump.conns.values()):
                if not c.task:
                    self._close(c)
            ep.close()

    # ---- group commit (Rule 6) ------------------------------------------------------------

    def _commit_group(self) -> None:
        pump = self.pump
        group = [(c, c.session.take_marks()) for c in pump.parked]
        pump.parked = []
        self.nursery.start_soon(self._settle, group)

    async def _settle(self, group: list[tuple[Conn, list[Mark]]]) -> None:
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

    def _resume(self, group: list[tuple[Conn, list[Mark]]], outcome: TokenOutcome) -> None:
        """Serve the sessions whose group is durable: their replies, then on as after FLUSH.
        Runs in the group's task, synchronously: between two awaits the reactor's sockets
        are only ever served by one piece of code at a time (trio runs one task at once)."""
        pump = self.pump
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
                pump.run(c, FLUSH)
            except Exception:
                pump.bug(c)
        if pump.sends:
            pump.send_queued()
        if self.turns:
            for c, _ in group:
                self._settle_turn(c)
        if pump.parked:  # sessions that ran more input and wait again: the next group
            self._commit_group()

    # ---- the connection's task while it waits ---------------------------------------------

    async def _drive(self, c: Conn, r: Outcome) -> None:
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
        self._settle_turn(c)

    def _close_from_task(self, c: Conn) -> None:
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
