"""The RESP front's two I/O paths (reactor and task per connection, see conftest.RESP_IO)
end to end through real sockets: a connection that blocks is handed to a task and back,
disconnects and CLIENT KILL while blocked or idle, many clients pipelining at once,
half-closed clients. QUIT, AUTH and the rest of the session's rules are tested in memory
(test_session.py)."""

from __future__ import annotations

import socket

import pytest
import trio

from tests.resp.conftest import (
    RESP_IO,
    InProc,
    frame,
    info_field,
    read_to_eof,
    read_until,
    wait_for,
)
from topicsrv.context import ServerConfig, make_context
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Front
from topicsrv.resp.connection import Connection
from topicsrv.resp.reactor import Reactor


def test_the_configured_io_path_is_used(inproc: InProc) -> None:
    assert inproc.ctx.metrics.resp.io == inproc.ctx.config.resp_io


def test_a_blocked_read_resumes_its_pipeline_in_order_then_serves_more(inproc: InProc) -> None:
    a = inproc.connect()
    a.sendall(frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"k", b"$") + frame(b"PING")
              + frame(b"XLEN", b"k"))
    wait_for(lambda: info_field(inproc, "blocked_clients") == 1)
    b = inproc.connect()
    b.sendall(frame(b"XADD", b"k", b"*", b"f", b"v"))
    assert read_until(b, b"\r\n").startswith(b"$")
    out = read_until(a, b":1\r\n")
    assert out.startswith(b"*1\r\n*2\r\n$1\r\nk\r\n")
    assert out.endswith(b"+PONG\r\n:1\r\n")
    assert info_field(inproc, "blocked_clients") == 0
    for _ in range(3):  # back on the fast path: still answers, in order
        a.sendall(frame(b"PING") + frame(b"ECHO", b"x"))
        assert read_until(a, b"$1\r\nx\r\n") == b"+PONG\r\n$1\r\nx\r\n"


def test_disconnect_while_blocked_unblocks_and_forgets_the_client(inproc: InProc) -> None:
    before = info_field(inproc, "connected_clients")
    a = inproc.connect()
    a.sendall(frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"gone", b"$"))
    wait_for(lambda: info_field(inproc, "blocked_clients") == 1)
    a.close()
    wait_for(lambda: info_field(inproc, "blocked_clients") == 0)
    wait_for(lambda: info_field(inproc, "connected_clients") == before)


def test_client_kill_ends_idle_and_blocked_connections(inproc: InProc) -> None:
    idle, blocked, killer = inproc.connect(), inproc.connect(), inproc.connect()
    ids = []
    for s in (idle, blocked):
        s.sendall(frame(b"CLIENT", b"ID"))
        ids.append(read_until(s, b"\r\n").strip()[1:])
    blocked.sendall(frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"kk", b"$"))
    wait_for(lambda: info_field(inproc, "blocked_clients") == 1)
    for cid in ids:
        killer.sendall(frame(b"CLIENT", b"KILL", b"ID", cid))
        assert read_until(killer, b"\r\n") == b":1\r\n"
    assert read_to_eof(idle) == b""
    assert read_to_eof(blocked) == b""
    assert info_field(inproc, "blocked_clients") == 0
    killer.sendall(frame(b"PING"))
    assert read_until(killer, b"\r\n") == b"+PONG\r\n"


def test_many_clients_pipelining_concurrently_all_get_their_replies(inproc: InProc) -> None:
    socks = [inproc.connect() for _ in range(20)]
    for i, s in enumerate(socks):
        s.sendall(frame(b"XADD", b"m", b"*", b"c", b"%d" % i) * 50 + frame(b"ECHO", b"done%d" % i))
    for i, s in enumerate(socks):
        out = read_until(s, b"done%d\r\n" % i)
        assert out.count(b"\r\n$") + 1 == 51
    w = inproc.connect()
    w.sendall(frame(b"XLEN", b"m"))
    assert read_until(w, b"\r\n") == b":1000\r\n"
    for s in socks:
        s.close()


def test_half_closed_client_still_gets_its_replies(inproc: InProc) -> None:
    s = inproc.connect()
    s.sendall(frame(b"XADD", b"h", b"*", b"f", b"v") * 3 + frame(b"PING"))
    s.shutdown(socket.SHUT_WR)
    out = read_to_eof(s)
    assert out.endswith(b"+PONG\r\n") and out.count(b"$") == 3


@pytest.mark.parametrize("io", RESP_IO)
def test_a_client_that_never_reads_is_cut_off_even_when_its_socket_never_drains(io: str) -> None:
    """Fixed (non-autotuned) socket buffers: once the reactor's send comes back short, the
    session is paused and must keep running the pipeline into its bounded buffer until the
    output limit closes it, not wait for the client to read (which it never does)."""
    ctx = make_context(ServerConfig(http_port=None, resp_port=0, storage=False,
                                    client_output_limit=1 << 20))
    load_all()
    front = Front()
    server_end, client_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
    client_end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    record = b"y" * 20_000
    client_end.sendall(frame(b"XADD", b"big", b"*", b"f", record)
                       + frame(b"XRANGE", b"big", b"-", b"+") * 500)  # 10 MB of replies

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            if io == "reactor":
                reactor = Reactor(ctx, front, nursery)
                nursery.start_soon(reactor.run)
                reactor.adopt(server_end)
            else:
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(server_end))
                nursery.start_soon(Connection(ctx, front, stream).run)
            with trio.move_on_after(10):
                while front.stats.output_limit_disconnects == 0:  # noqa: ASYNC110 - a counter
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert front.stats.output_limit_disconnects == 1
    client_end.settimeout(5)
    got = bytearray()
    while chunk := client_end.recv(1 << 16):  # what the kernel held, then EOF
        got += chunk
    assert len(got) < 2 << 20
    client_end.close()
