"""RESP over TLS (`--tls-port`): `TlsIO`, the socket interface `connection.drive` needs, over
an `ssl.SSLObject` and two memory BIOs on the raw non-blocking socket; `TlsConnection`, the
task that serves one TLS client.

TLS connections are always served by the task path (topicsrv/resp/connection.py `drive`),
whatever `--resp-io` says: the reactor's synchronous epoll loop works on raw sockets, and a
TLS record arriving in pieces makes "readable" mean nothing to it. A TLS client costs the
scheduler round trips of the task path, nothing else changes: the session is the same.

Rule 1 (same contract as SocketIO): `send_nowait` takes what can be encrypted now and returns
how many plaintext bytes it took (0 while ciphertext from an earlier call is still unsent, so
buffered ciphertext stays bounded by CHUNK plus one record); `recv_nowait` returns plaintext,
b"" at the end (close_notify or TCP EOF), or None when nothing can be read now;
`wait_readable_first` is true at once while decrypted or undecrypted bytes are buffered.
Rule 2: the awaitable `send` returns only once its ciphertext is in the kernel (what "must go
out first" means to drive); the awaitable `recv` keeps flushing buffered ciphertext while it
waits for input, so neither side of a pipelining client can deadlock on our buffer.
Rule 3: a TLS error (garbage, plain text, a protocol violation) is an OSError (ssl.SSLError):
the connection loop logs it at debug level and closes that connection only.
Rule 4: the handshake runs inside the connection's task, counted as a client, and ends within
tls.HANDSHAKE_TIMEOUT_S; a failed handshake sends OpenSSL's alert when it can and closes.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import trio

from topicsrv import tls
from topicsrv.resp.connection import Connection, SocketIO

CHUNK = 64 * 1024  # plaintext taken per send_nowait
READ_SIZE = 64 * 1024  # ciphertext read from the socket at a time


class TlsIO(SocketIO):
    __slots__ = ("obj", "incoming", "outgoing", "wbuf", "eof")

    def __init__(self, raw: socket.socket, context: ssl.SSLContext) -> None:
        super().__init__(raw)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.wbuf = bytearray()  # ciphertext the socket has not taken yet
        self.eof = False

    # ---- ciphertext <-> socket --------------------------------------------------------------

    def _flush_nowait(self) -> bool:
        """Send the ciphertext produced so far; True when all of it is in the kernel."""
        if self.outgoing.pending:
            self.wbuf += self.outgoing.read()
        while self.wbuf:
            try:
                n = self.raw.send(self.wbuf)
            except BlockingIOError:
                return False
            del self.wbuf[:n]
        return True

    async def _flush(self) -> None:
        while not self._flush_nowait():
            await trio.lowlevel.wait_writable(self.raw)

    def _fill_nowait(self) -> bool | None:
        """Feed ciphertext from the socket to TLS: True some, False EOF, None nothing now."""
        try:
            data = self.raw.recv(READ_SIZE)
        except BlockingIOError:
            return None
        if not data:
            self.incoming.write_eof()
            self.eof = True
            return False
        self.incoming.write(data)
        return True

    # ---- the handshake (Rule 4) -------------------------------------------------------------

    async def handshake(self) -> bool:
        peer = self.raw.getpeername() if self.raw.fileno() >= 0 else "?"
        with trio.move_on_after(tls.HANDSHAKE_TIMEOUT_S):
            try:
                while True:
                    try:
                        self.obj.do_handshake()
                        break
                    except ssl.SSLWantReadError:
                        pass
                    await self._flush()
                    got = self._fill_nowait()
                    if got is None:
                        await trio.lowlevel.wait_readable(self.raw)
                    elif got is False and not self.incoming.pending:
                        tls.failed(str(peer), "the peer closed during the handshake")
                        return False
                await self._flush()
            except OSError as exc:  # ssl.SSLError included: bad hello, no certificate, ...
                try:
                    self._flush_nowait()  # the alert, if the socket takes it
                except OSError:
                    pass
                tls.failed(str(peer), exc)
                return False
            tls.STATS.ok += 1
            return True
        tls.STATS.timed_out += 1
        return False

    # ---- SocketIO ---------------------------------------------------------------------------

    def recv_nowait(self, size: int) -> bytes | None:
        self._flush_nowait()
        while True:
            try:
                data = self.obj.read(size)
            except ssl.SSLWantReadError:
                if self.eof:
                    return b""
                if self._fill_nowait() is None:
                    return None
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            self._flush_nowait()  # reading may answer the peer (TLS 1.3 key update)
            return data

    async def recv(self, size: int) -> bytes:
        await trio.lowlevel.checkpoint()
        while True:
            data = self.recv_nowait(size)
            if data is not None:
                return data
            if self.wbuf:
                await SocketIO.wait_readable_first(self)  # flush as the socket takes it
            else:
                await trio.lowlevel.wait_readable(self.raw)

    def send_nowait(self, data: Any) -> int:
        if not self._flush_nowait():
            return 0
        n = min(len(data), CHUNK)
        self.obj.write(data[:n])
        self._flush_nowait()
        return n

    async def send(self, data: Any) -> int:
        await trio.lowlevel.checkpoint()
        while True:
            n = self.send_nowait(data)
            if n or not len(data):
                break
            await trio.lowlevel.wait_writable(self.raw)
        await self._flush()
        return n

    async def wait_readable_first(self) -> bool:
        if self.obj.pending() or self.incoming.pending:
            await trio.lowlevel.checkpoint()
            return True
        return await SocketIO.wait_readable_first(self)

    def close_nowait(self) -> None:
        """Say goodbye (close_notify) if the socket takes it now; never waits."""
        try:
            self.obj.unwrap()
        except (ssl.SSLError, OSError, ValueError):
            pass
        try:
            self._flush_nowait()
        except OSError:
            pass


class TlsConnection(Connection):
    """A RESP client on the TLS port: the handshake, then `drive` over TlsIO."""

    def __init__(self, server: Any, front: Any, stream: trio.SocketStream,
                 context: ssl.SSLContext) -> None:
        super().__init__(server, front, stream)
        self.context = context

    async def open_io(self) -> SocketIO | None:
        io = TlsIO(self.sock, self.context)
        return io if await io.handshake() else None
