"""One RESP session, sans-IO: bytes in, replies out, and what the I/O adapter must wait for.

In the spirit of h11's `Connection`: the two I/O adapters (topicsrv/resp/reactor.py, one
epoll for every idle socket, and topicsrv/resp/connection.py, a task per connection) own the
sockets and the tasks; this module owns what a RESP connection means: framing
(RequestParser), execution (dispatch.execute, batch.run_xadds), encoding into one output
buffer, output limits, protocol errors, QUIT / POST / CLIENT KILL of itself, the input kept
while a command blocks, EOF, and the client's bookkeeping shown by CLIENT LIST and INFO.

An adapter's loop: `r = step()`; if r is WAIT_COMMIT, `await wait_commits()` (or, for many
sessions at once, `take_marks()` + awaits.wait_tokens + awaits.apply_outcome); then send all
of `out` (reporting each send with `sent(n)`), then act on r and call `step()` again:

    NEED_DATA     the session is idle: read, then `receive_data(data)` (b"" is EOF)
    FLUSH         nothing more (the output had to go out before the rest of the batch)
    WAIT_COMMIT   nothing more (the replies waited for their commit tokens first)
    WAIT_COMMAND  `aw = start_wait()`; await it while reading into `receive_data` for as
                  long as `wants_input()`; then `end_wait(result)` (`abandon_wait()` if the
                  wait was cancelled)
    YIELD         give the other connections a turn (a checkpoint)
    CLOSE         close the socket, then `close()`

Rule 1 (pipelining): every complete frame of a read is executed in order before more input
is taken. Replies gather in `out`, which goes out when the batch is done (with NEED_DATA or
CLOSE, so the idle path is one step() per read), when it passes FLUSH_AT, and before a
command waits (then `out` is empty with WAIT_COMMAND and YIELD).
Rule 2 (bounded output): a single reply larger than `client_output_limit` is replaced by an
error (`emit`, topicsrv/resp/replysize.py); output that still outgrows the limit when a flush
is due is CLOSE (counted in output_limit_disconnects, logged), never more server memory.
Rule 2b (no pipeline deadlock, as redis-server): once the socket did not take all of `out`
(`sent(n)` short: the client is `paused`, not reading yet), the session keeps running input
while its replies wait: FLUSH_AT no longer stops a batch, the input kept meanwhile runs
without waiting for `out` to drain, and the adapter keeps reading (connection.drive), so a
client that writes a whole pipeline before reading its replies is served to the end. Only
the limit stops it: pending output past `client_output_limit` is CLOSE. FLUSH while paused
means the output really must go out first (a command is about to wait, or take a turn).
Rule 3 (blocking): a command that returns an awaitable (XREAD BLOCK ...) is WAIT_COMMAND once
the replies before it are out. Input that arrives meanwhile is kept, up to STASH_MAX (then
`wants_input()` is False), and parsed after the wait; EOF during the wait drops the rest and
closes; a wait ended by CLIENT KILL is abandoned. Most blocking commands return a `Block`
(topicsrv/notify/blocks.py), which the reactor parks without a task; whatever ends a session's
wait without sending its result (EOF, a kill, the close) closes or abandons the Block, so a
result it got is given back.
Rule 4 (durability): a reply that waits for its commit token (`Pending`) is encoded with a
mark; a flush with marks is WAIT_COMMIT: the tokens are awaited once per flush, and a failed
commit's reply is replaced in place by its error.
Rule 5 (fairness): a command with more than dispatch.BIG_ARGV arguments gets turns of its
own: YIELD before it runs (after the replies before it are out) and YIELD before its reply is
encoded, so the clients served by the same loop run between its parse, its execution and its
reply.
Rule 6: a protocol error replies `-ERR Protocol error: ...` after the replies of the commands
before it, then CLOSE, like redis-server; another protocol's bytes (a TLS handshake, a NUL in
an inline line: protocol.py Rule 4) are answered with nothing, logged as an attack and CLOSE.
QUIT, a POST / Host: command (dispatch Rule 3) and a
CLIENT KILL of itself (`close_after_reply`) drop the rest of the input and close once the
output is out.
Rule 7: a run of plain `XADD key * ...` to one key in a batch is one engine write, a run of
plain `SET key value` one keyspace operation, a run of `GET key` read without the per-command
dispatch (batch.py), each command still answered on its own; not inside MULTI or under WATCH.
Rule 8: nothing here touches a socket or imports an I/O library, and nothing here is async
(the module is compiled: topicsrv/buildinfo.py); the only awaits are the commit tokens, in
`awaits.settle`, whose coroutine `wait_commits` returns. The hot path (receive_data -> step -> NEED_DATA -> send -> sent)
allocates nothing per command beyond the parse and the reply itself.
Rule 9 (pub/sub, topicsrv/resp/pubsub.py): a message for a subscribed client is appended to
`out` by the bus at any time the session is not running, and `wake()` (set by the adapter)
says output is due although no input came; the adapter then sends `out` as after a step.
`drop_output()` empties `out` when the bus cuts the client (its unsent bytes are let go at
once); `close()` leaves every channel.
"""

from __future__ import annotations

import enum
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from topicsrv.context import ServerContext
from topicsrv.resp.awaits import settle
from topicsrv.resp.batch import run_strings, run_xadds
from topicsrv.resp.batch_colls import run_colls
from topicsrv.resp.commands.base import (
    REPLY_ON,
    REPLY_SKIP,
    REPLY_SKIP_NEXT,
    CommandContext,
    Front,
    Pending,
    Pushed,
    Simple,
)
from topicsrv.resp.dispatch import BIG_ARGV, execute, internal_error, is_awaitable, security_attack
from topicsrv.resp.encoder import encode, encode_error
from topicsrv.resp.multi import ExecReply
from topicsrv.resp.protocol import ATTACKS, RequestParser
from topicsrv.resp.pubsub import leave
from topicsrv.resp.replysize import too_big

log: Final = logging.getLogger("topicsrv.resp")

FLUSH_AT: Final = 64 * 1024  # pending output that is sent before more commands run
STASH_MAX: Final = 1 << 20  # input kept while a command blocks; beyond it the client is paused
COMPACT_AT: Final = 1 << 20  # sent output dropped from the front of `out` while the rest waits

Mark = tuple[Any, int, int]  # (commit token, reply start, reply end) in `out`


class Outcome(enum.Enum):
    """What the adapter must do before the next `step()` (see the module docstring)."""

    NEED_DATA = "need data"
    FLUSH = "flush"
    WAIT_COMMIT = "wait commit"
    WAIT_COMMAND = "wait command"
    YIELD = "yield"
    CLOSE = "close"


NEED_DATA: Final = Outcome.NEED_DATA
FLUSH: Final = Outcome.FLUSH
WAIT_COMMIT: Final = Outcome.WAIT_COMMIT
WAIT_COMMAND: Final = Outcome.WAIT_COMMAND
YIELD: Final = Outcome.YIELD
CLOSE: Final = Outcome.CLOSE

_NO_CMDS: Final[list[list[bytes]]] = []  # "no batch in progress"; never mutated


def _no_wake() -> None:
    """The adapter has not asked to be told about unasked output (yet)."""


class _Held:
    """A reply computed but not yet encoded (after a wait, or across a Rule 5 turn)."""

    __slots__ = ("reply",)

    def __init__(self, reply: Any) -> None:
        self.reply = reply


class Session:
    __slots__ = ("client", "front", "ctx", "parser", "limit", "out", "sent_off", "marks",
                 "cmds", "pos", "err", "stash", "stash_size", "eof", "closing", "hold",
                 "turned", "flush_at", "wake")

    def __init__(self, server: ServerContext, front: Front, addr: str = "?:0",
                 laddr: str = "?:0", fd: int = -1) -> None:
        client = front.new_client(addr, laddr)
        client.fd = fd
        client.authenticated = not server.config.requirepass
        client.session = self
        self.client = client
        self.front = front
        self.ctx = CommandContext(server, client, front)
        self.parser = RequestParser(server.config.proto_max_bulk_len, client.authenticated)
        self.limit = server.config.client_output_limit
        self.out = bytearray()  # replies not yet sent; out[:sent_off] already went out
        self.sent_off = 0
        self.marks: list[Mark] = []
        self.cmds = _NO_CMDS  # the batch being executed, from cmds[pos]
        self.pos = 0
        self.err: str | None = None  # protocol error to answer once the batch is done
        self.stash: list[bytes] = []  # input kept while busy (Rule 3)
        self.stash_size = 0
        self.eof = False
        self.closing = False  # close once the output is out (Rule 6)
        self.hold: Any = None  # an awaitable to wait for, or a _Held reply to encode
        self.turned = False  # the big command at cmds[pos] had its turn (Rule 5)
        self.flush_at = FLUSH_AT  # len(out) that makes a batch stop for a flush (Rule 2b)
        self.wake: Callable[[], None] = _no_wake  # output is due unasked (Rule 9)

    # ---- input -------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the client; b"" is EOF."""
        if not data:
            self.eof = True
            return
        self.front.stats.net_input_bytes += len(data)
        if self.hold is not None or self.stash or self.pos < len(self.cmds):
            self.stash.append(data)  # busy: parsed when the batch and any wait are done
            self.stash_size += len(data)
            return
        self._parse(data)

    def wants_input(self) -> bool:
        """False once EOF was seen or the input kept during a wait reached STASH_MAX."""
        return not self.eof and self.stash_size < STASH_MAX

    def _parse(self, data: bytes) -> None:
        cmds, err = self.parser.feed(data)
        if cmds:
            self.client.last_interaction = time.monotonic()
        self.cmds, self.pos, self.err = cmds, 0, err

    # ---- execution ---------------------------------------------------------------------

    def step(self) -> Outcome:
        """Run what can run now; the outcome says what the adapter must do next."""
        out = self.out
        client, ctx, marks = self.client, self.ctx, self.marks
        hold = self.hold
        if hold is not None:
            if type(hold) is not _Held:  # a command waits once the output before it is out
                return self._output() if out else WAIT_COMMAND
            self.hold = None
            emit(out, marks, hold.reply, client.protocol == 3, ctx)
            if client.close_after_reply:
                self._drop_rest()
            elif len(out) >= self.flush_at:
                return self._output()
        while True:
            cmds = self.cmds
            n = len(cmds)
            pos = self.pos
            while pos < n:
                argv = cmds[pos]
                k = len(argv)
                replies: list[Any] | None = None
                if k >= 5:
                    if k > BIG_ARGV:
                        self.pos = pos
                        return self._big(argv)
                    if argv[2] == b"*" and client.tx is None:
                        replies = run_xadds(ctx, cmds, pos)
                elif 2 <= k <= 3 and client.tx is None:
                    replies = run_strings(ctx, cmds, pos)  # batch.py Rules 7-10
                if replies is None and k >= 2 and client.tx is None:
                    replies = run_colls(ctx, cmds, pos)  # batch_colls.py
                if replies is not None:
                    pos += len(replies)
                    resp3 = client.protocol == 3
                    first = replies[0]
                    if type(first) is Simple and client.reply_mode == REPLY_ON and \
                            replies.count(first) == len(replies):  # a run of SETs: +OK each
                        start = len(out)
                        _emit(out, marks, first, resp3, ctx)
                        out += out[start:] * (len(replies) - 1)
                    else:
                        for reply in replies:
                            emit(out, marks, reply, resp3, ctx)
                    if len(out) >= self.flush_at:
                        self.pos = pos
                        return self._output()
                    continue
                pos += 1
                reply = execute(ctx, argv)
                if is_awaitable(reply):
                    self.pos = pos
                    self.hold = reply
                    return self._output() if out else WAIT_COMMAND
                emit(out, marks, reply, client.protocol == 3, ctx)
                if client.close_after_reply:
                    self._drop_rest()
                    break
                if len(out) >= self.flush_at:
                    self.pos = pos
                    return self._output()
            if cmds is not _NO_CMDS:  # the batch is done
                self.cmds, self.pos = _NO_CMDS, 0
                self.parser.authenticated = client.authenticated
                if self.err is not None:
                    if self.err in ATTACKS:
                        security_attack(ctx, self.err)  # no answer (protocol.py Rule 4)
                        self._drop_rest()
                    elif not self.closing:
                        encode_error(out, f"ERR {self.err}")
                        log.info("client %d (%s): %s; closing", client.id, client.addr, self.err)
                        self._drop_rest()
                    self.err = None
            if out and (marks or len(out) - self.sent_off > self.limit):
                return self._output()
            if self.closing or self.eof:
                return CLOSE
            if not self.stash:
                return NEED_DATA
            if out and not client.paused:
                return FLUSH  # the replies go out before the input kept meanwhile runs
            data = b"".join(self.stash)
            self.stash.clear()
            self.stash_size = 0
            self._parse(data)

    def _big(self, argv: list[bytes]) -> Outcome:
        """Rule 5: cmds[pos] has more than BIG_ARGV arguments."""
        if not self.turned:
            if self.out:
                return self._output()
            self.turned = True
            return YIELD
        self.turned = False
        self.pos += 1
        reply = execute(self.ctx, argv)
        if is_awaitable(reply):
            self.hold = reply
            return WAIT_COMMAND
        self.hold = _Held(reply)
        return YIELD

    def _output(self) -> Outcome:
        """Output is due: FLUSH, WAIT_COMMIT when replies wait for commits, or CLOSE past
        the output limit (Rule 2)."""
        if over_output_limit(self.front.stats, self.client, len(self.out) - self.sent_off,
                             self.limit):
            self._drop_rest()
            self._discard_hold()
            self.out.clear()
            self.sent_off = 0
            self.marks.clear()
            return CLOSE
        return WAIT_COMMIT if self.marks else FLUSH

    def _drop_rest(self) -> None:
        """Rule 6: nothing after this point runs; CLOSE once the output is out."""
        self.closing = True
        self.pos = len(self.cmds)
        self.stash.clear()
        self.stash_size = 0

    def _discard_hold(self) -> None:
        hold, self.hold = self.hold, None
        if isinstance(hold, Coroutine):  # also a compiled coroutine (not inspect.iscoroutine)
            hold.close()  # never awaited: no "was never awaited" warning
        elif hold is not None and type(hold) is not _Held:
            close = getattr(hold, "close", None)  # a Block leaves its lines (notify/blocks.py)
            if close is not None:
                close()

    # ---- waits -------------------------------------------------------------------------

    def wait_commits(self) -> Awaitable[None]:
        """WAIT_COMMIT: wait for the commit tokens of the replies in `out` (Rule 4); returns
        the coroutine to await (this module has no async code of its own: Rule 8)."""
        return settle(self.take_marks(), self.out, self.front)

    def take_marks(self) -> list[Mark]:
        """WAIT_COMMIT for an adapter that waits for many sessions' commits at once (the
        reactor's group commit): the marks of the replies in `out`. The adapter awaits their
        tokens, applies the outcome to `out` (awaits.apply_outcome) and then carries on as
        after FLUSH."""
        marks, self.marks = self.marks, []
        return marks

    def start_wait(self) -> Awaitable[Any]:
        """WAIT_COMMAND: the awaitable to wait for; the client shows as blocked meanwhile."""
        assert self.hold is not None and type(self.hold) is not _Held
        self.client.blocked = True
        aw: Awaitable[Any] = self.hold
        return aw

    def end_wait(self, result: Any) -> None:
        """The awaitable of start_wait() returned `result` (ignored after EOF: Rule 3; a Block's
        result is then given back, topicsrv/notify/blocks.py Rule 2)."""
        self.client.blocked = False
        hold, self.hold = self.hold, None
        if self.eof:
            self._drop_rest()
            abandon = getattr(hold, "abandon", None)
            if abandon is not None:
                abandon()
        else:
            self.hold = _Held(result)

    def abandon_wait(self) -> None:
        """The wait was cancelled (CLIENT KILL, shutdown): the session is over."""
        self.client.blocked = False
        self._discard_hold()
        self._drop_rest()

    # ---- output ------------------------------------------------------------------------

    def sent(self, n: int) -> None:
        """The adapter sent the next `n` bytes of `out` (from `sent_off`)."""
        client = self.client
        self.front.stats.net_output_bytes += n
        done = self.sent_off + n
        left = len(self.out) - done
        if left <= 0:
            self.out.clear()
            self.sent_off = 0
            if client.paused:
                client.paused = False
                client.out_pending = 0
                self.flush_at = FLUSH_AT
            return
        if done >= COMPACT_AT and not self.marks:  # what went out leaves the buffer
            del self.out[:done]
            done = 0
        self.sent_off = done
        client.paused = True  # waiting to write: events=w in CLIENT LIST
        client.out_pending = left
        self.flush_at = done + self.limit + 1  # Rule 2b: only the limit stops a batch now

    def data_to_send(self) -> bytes:
        """All pending output, as sent (for adapters that send a copy, and tests)."""
        data = bytes(self.out[self.sent_off:])
        self.sent(len(data))
        return data

    def drop_output(self) -> None:
        """Rule 9: the client is being cut; what it had not read is let go now."""
        self._drop_rest()
        self.out.clear()
        self.sent_off = 0
        self.marks.clear()

    def close(self) -> None:
        """The adapter closed the socket: the client is gone from CLIENT LIST and INFO, and
        from every channel."""
        self.front.clients.pop(self.client.id, None)
        self.wake = _no_wake
        if self.client.pubsub is not None:
            leave(self.ctx.server.bus, self.client)
        server = self.ctx.server
        server.primary.handshakes.pop(self.client.id, None)
        if self.client.repl is not None:  # a replica's link (repl/primary.py)
            server.primary.drop(self.client.repl)
        self.client.blocked = False
        if self.client.tx is not None:  # its watches leave the registry (multi.py Rule 3)
            self.client.tx.end()
            self.client.tx = None
        self._discard_hold()


def emit(out: bytearray, marks: list[Mark], reply: Any, resp3: bool,
         ctx: CommandContext) -> None:
    """Encode the reply of one command into `out` (called once per command), unless CLIENT
    REPLY silences it (`_silenced`); see `_emit`."""
    if ctx.client.reply_mode != REPLY_ON and _silenced(ctx.client, reply):
        return
    _emit(out, marks, reply, resp3, ctx)


def _silenced(client: Any, reply: Any) -> bool:
    """CLIENT REPLY (commands/base.py REPLY_*): whether this command's reply is dropped, and
    the SKIP state moved on by one command. Pub/sub frames (Pushed) always go out."""
    mode = client.reply_mode
    if mode == REPLY_SKIP_NEXT:  # the reply of CLIENT REPLY SKIP itself
        client.reply_mode = REPLY_SKIP
        return True
    if mode == REPLY_SKIP:
        client.reply_mode = REPLY_ON
    return type(reply) is not Pushed


def _emit(out: bytearray, marks: list[Mark], reply: Any, resp3: bool,
          ctx: CommandContext) -> None:
    """Encode `reply` into `out`; a write waiting for its commit (Pending) leaves a mark so
    `settle` can wait for it and swap in the error if the commit fails. A reply that cannot
    be encoded (a bug) or is over the output limit is replaced by an error (dispatch Rule 2,
    Rule 2 here)."""
    start = len(out)
    if type(reply) is ExecReply:  # each element on its own: its own commit mark (Rule 4)
        # the cyclic GC stays paused while a big EXEC's replies are encoded, as while it ran
        # (transactions.py Rule 5): a collection triggered by the new reply bytes would walk
        # the whole heap in the middle of the step (38% of a 300,000-XADD EXEC's stall)
        paused = len(reply) > 1000 and gc.isenabled()
        if paused:
            gc.disable()
        try:
            out += b"*%d\r\n" % len(reply)
            for item in reply:
                if type(item) is bytes and len(item) < 4096:  # an XADD's ID, a small value:
                    out += b"$%d\r\n%b\r\n" % (len(item), item)  # no mark, far below limits
                else:
                    _emit(out, marks, item, resp3, ctx)
        finally:
            if paused:
                gc.enable()
        ctx.server.lazyfree.add(reply)  # its replies are freed in slices (topicsrv/lazyfree.py)
        return
    pending = type(reply) is Pending
    try:
        encode(out, reply.reply if pending else reply, resp3)
    except Exception:
        del out[start:]
        encode_error(out, internal_error(ctx.front, "encoding a reply").text)
        return
    size = len(out) - start
    limit = ctx.server.config.client_output_limit
    if size > limit and ctx.client.repl is None:  # a replica's full sync is bounded by its link
        del out[start:]
        encode_error(out, too_big(ctx, f"{size} bytes"))
        return
    if pending:
        marks.append((reply.token, start, len(out)))


def over_output_limit(stats: Any, client: Any, pending: int, limit: int) -> bool:
    """True (counted and logged) when a client's pending replies exceed its output limit."""
    if pending <= limit or client.repl is not None:  # a replica's link: repl/primary.py Rule 3
        return False
    stats.output_limit_disconnects += 1
    log.warning("client id=%d addr=%s closed for overcoming of output buffer limits: %d bytes "
                "of replies not read > client-output-limit %d", client.id, client.addr, pending,
                limit)
    return True
