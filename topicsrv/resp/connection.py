"""The trio adapter: the only RESP code that touches a socket.

Rule 1 (pipelining): every complete frame in the input is executed before the next read, and
the replies go out in ONE `send_all` per flush (a flush also happens when the pending output
passes FLUSH_AT, and before a blocking command waits).
Rule 2 (bounded output): input is not read while output is being sent, so a client that does
not read its replies is paused by TCP back-pressure; a single reply larger than
`config.client_output_limit` is refused with an error (dispatch Rule 4), and a batch that
still outgrows it disconnects the client instead of growing server memory.
Rule 3 (blocking): while an async handler waits (XREAD BLOCK), input is still watched: EOF
cancels the wait and closes; bytes that arrive are kept (bounded) for after the wait.
CLIENT KILL cancels the connection's scope, which cancels a wait too.
Rule 4: a run of plain `XADD key * ...` to one key in a read is one engine write
(topicsrv/resp/batch.py), each command still answered on its own.
Rule 5: a protocol error replies `-ERR Protocol error: ...` and closes, like redis-server.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any

import trio

from topicsrv.context import ServerContext
from topicsrv.resp.batch import run_xadds
from topicsrv.resp.commands.base import CommandContext, Front
from topicsrv.resp.dispatch import emit, execute, over_output_limit, settle
from topicsrv.resp.encoder import encode_error
from topicsrv.resp.protocol import RequestParser

log = logging.getLogger("topicsrv.resp")

READ_SIZE = 64 * 1024
FLUSH_AT = 64 * 1024
STASH_MAX = 1 << 20  # input kept while a command blocks; beyond it the client is paused


def _addr(sock: Any, peer: bool) -> str:
    try:
        host, port = (sock.getpeername() if peer else sock.getsockname())[:2]
        return f"{host}:{port}"
    except OSError:
        return "?:0"


class _Closed(Exception):
    pass


class Connection:
    def __init__(self, server: ServerContext, front: Front, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.front = front
        sock = stream.socket
        client = front.new_client(_addr(sock, True), _addr(sock, False))
        client.fd = sock.fileno()
        client.authenticated = not server.config.requirepass
        self.client = client
        self.ctx = CommandContext(server, client, front)
        self.parser = RequestParser(server.config.proto_max_bulk_len, client.authenticated)
        self.limit = server.config.client_output_limit
        self.stash: list[bytes] = []
        self.marks: list[tuple[Any, int, int]] = []  # (commit token, reply start, end) in out
        self.eof = False
        self.scope = trio.CancelScope()

        def kill() -> None:
            client.killed = True
            self.scope.cancel()

        client.kill = kill

    async def run(self) -> None:
        try:
            with self.scope:
                await self._loop()
        except (_Closed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except OSError as e:
            log.debug("client %d: %s", self.client.id, e)
        except Exception:  # a bug outside any command (dispatch guards those): one connection
            self.front.stats.unexpected_errors += 1
            log.exception("client %d: unexpected error; closing", self.client.id)
        finally:
            self.front.clients.pop(self.client.id, None)
            await trio.aclose_forcefully(self.stream)

    async def _loop(self) -> None:
        client, parser, stats = self.client, self.parser, self.front.stats
        out = bytearray()
        while True:
            if self.stash:
                data = b"".join(self.stash)
                self.stash.clear()
            else:
                data = await self.stream.receive_some(READ_SIZE)
                if not data:
                    return
                stats.net_input_bytes += len(data)
            cmds, err = parser.feed(data)
            if cmds:
                client.last_interaction = time.monotonic()
            i, n = 0, len(cmds)
            while i < n:
                argv = cmds[i]
                if len(argv) >= 5 and argv[2] == b"*" and n - i > 1:
                    replies = run_xadds(self.ctx, cmds, i)  # one engine write for the run
                    if replies is not None:
                        i += len(replies)
                        for reply in replies:
                            self._emit(out, reply)
                        if len(out) >= FLUSH_AT:
                            await self._flush(out)
                        continue
                i += 1
                reply = execute(self.ctx, argv)
                if inspect.isawaitable(reply):
                    if out:
                        await self._flush(out)
                    reply = await self._blocking(reply)
                self._emit(out, reply)
                if client.close_after_reply:
                    await self._flush(out)
                    return
                if len(out) >= FLUSH_AT:
                    await self._flush(out)
            parser.authenticated = client.authenticated
            if err is not None:
                encode_error(out, f"ERR {err}")
                await self._flush(out)
                log.info("client %d (%s): %s; closing", client.id, client.addr, err)
                return
            if out:
                await self._flush(out)

    def _emit(self, out: bytearray, reply: Any) -> None:
        emit(out, self.marks, reply, self.client.protocol == 3, self.ctx)

    async def _flush(self, out: bytearray) -> None:
        n = len(out)
        if over_output_limit(self.front.stats, self.client, n, self.limit):
            raise _Closed
        if self.marks:
            marks, self.marks = self.marks, []
            await settle(marks, out, self.front)
            n = len(out)
        self.client.out_pending = n
        self.client.paused = True
        try:
            await self.stream.send_all(out)
        finally:
            self.client.paused = False
            self.client.out_pending = 0
        self.front.stats.net_output_bytes += n
        out.clear()

    async def _blocking(self, reply: Any) -> Any:
        """Await a blocking handler while watching the input for EOF."""
        client = self.client
        client.blocked = True
        result: Any = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_input, nursery.cancel_scope)
                result = await reply
                nursery.cancel_scope.cancel()
        finally:
            client.blocked = False
        if self.eof:
            raise _Closed
        return result

    async def _watch_input(self, scope: trio.CancelScope) -> None:
        size = 0
        while size < STASH_MAX:
            data = await self.stream.receive_some(READ_SIZE)
            if not data:
                self.eof = True
                scope.cancel()
                return
            self.front.stats.net_input_bytes += len(data)
            self.stash.append(data)
            size += len(data)
