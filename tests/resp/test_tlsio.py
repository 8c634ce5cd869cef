"""TlsIO (topicsrv/resp/tlsio.py) on a socketpair with small fixed buffers, against a
blocking stdlib TLS client in a thread: the contract `connection.drive` relies on."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.tlscerts import Certs, make_certs
from topicsrv.resp.tlsio import TlsIO
from topicsrv.tls import server_context

BUF = 8192


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tlsio"))


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)
    a.setblocking(False)
    return a, b


def client_side(certs: Certs, sock: socket.socket,
                script: Callable[[ssl.SSLSocket], Any]) -> Callable[[], Any]:
    def run() -> Any:
        context = ssl.create_default_context(cafile=str(certs.ca))
        with context.wrap_socket(sock, server_hostname="localhost") as tls:
            tls.settimeout(10)
            return script(tls)
    return run


def read_exactly(tls: ssl.SSLSocket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = tls.recv(n - len(buf))
        assert chunk, "EOF before all the data"
        buf += chunk
    return buf


async def serve(certs: Certs, server: Callable[[TlsIO], Any],
                client: Callable[[ssl.SSLSocket], Any]) -> tuple[Any, Any]:
    raw, peer = pair()
    context = server_context(Path(certs.server_cert), Path(certs.server_key))
    assert context is not None
    io = TlsIO(raw, context)
    out: dict[str, Any] = {}
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def run_client() -> None:
                    out["client"] = await trio.to_thread.run_sync(client_side(certs, peer, client))

                nursery.start_soon(run_client)
                assert await io.handshake()
                out["server"] = await server(io)
    finally:
        raw.close()
    return out["server"], out["client"]


async def test_recv_flushes_ciphertext_the_socket_did_not_take(certs: Certs) -> None:
    """send_nowait takes a 60 KiB reply that an 8 KiB socket cannot hold; the client reads
    it all, only then answers. recv must keep flushing while it waits (tlsio Rule 2), or
    both sides wait forever."""
    reply = bytes(range(256)) * 240

    async def server(io: TlsIO) -> bytes:
        taken = io.send_nowait(reply)
        assert taken == len(reply) and io.wbuf  # accepted, mostly still buffered
        return await io.recv(100)

    def client(tls: ssl.SSLSocket) -> bytes:
        time.sleep(0.2)  # the server is in recv by now, its buffer full
        got = read_exactly(tls, len(reply))
        tls.sendall(b"thanks")
        return got

    got_server, got_client = await serve(certs, server, client)
    assert got_server == b"thanks" and got_client == reply


async def test_send_returns_once_the_ciphertext_is_in_the_kernel(certs: Certs) -> None:
    reply = b"x" * 50_000

    async def server(io: TlsIO) -> int:
        n = 0
        while n < len(reply):
            n += await io.send(memoryview(reply)[n:])
            assert not io.wbuf
        return n

    def client(tls: ssl.SSLSocket) -> bytes:
        return read_exactly(tls, len(reply))

    assert await serve(certs, server, client) == (len(reply), reply)


async def test_buffered_plaintext_counts_as_readable(certs: Certs) -> None:
    async def server(io: TlsIO) -> list[bytes]:
        first = await io.recv(5)
        with trio.fail_after(1):
            assert await io.wait_readable_first() is True  # "world" is decrypted already
        rest = io.recv_nowait(100)
        assert rest is not None
        end = await io.recv(10)
        io.close_nowait()  # our close_notify ends the client's unwrap
        return [first, rest, end]

    def client(tls: ssl.SSLSocket) -> None:
        tls.sendall(b"helloworld")
        time.sleep(0.3)
        tls.unwrap()  # close_notify: the server reads the end

    got, _ = await serve(certs, server, client)
    assert got == [b"hello", b"world", b""]
