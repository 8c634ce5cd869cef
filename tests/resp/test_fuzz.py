"""Random and truncated RESP: in full against the session in memory (with the task loop
`connection.drive` over an in-memory socket), and with a smaller budget through the real
sockets of each I/O path. Whatever arrives, the server answers complete replies or a
protocol error and closes, never raises, never hangs, and keeps serving everyone else."""

from __future__ import annotations

import socket
from typing import Any, cast

import hiredis
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.resp.conftest import InProc, frame, read_to_eof, read_until
from topicsrv.context import ServerConfig, make_context
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Front
from topicsrv.resp.connection import drive
from topicsrv.resp.session import NEED_DATA, Session

WORDS = [b"PING", b"XADD", b"XREAD", b"XRANGE", b"s", b"*", b"-", b"+", b"$", b"0", b"BLOCK",
         b"STREAMS", b"COUNT", b"MAXLEN", b"1", b"f", b"v", b"XINFO", b"STREAM", b"TOPIC.DIFF",
         b"HELLO", b"3", b"XTRIM", b"XDEL", b"1-1", b"(1", b"\x00\xff", b"QUIT"]
KILL_WORDS = [b"CLIENT", b"KILL", b"ID", b"2"]  # in memory only: over sockets they may kill
# the witness connection, whose whole point is to stay served


def _chunks(words: list[bytes]) -> st.SearchStrategy[list[bytes]]:
    frames = st.lists(st.sampled_from(words), min_size=1, max_size=7).map(lambda a: frame(*a))
    garbage = st.one_of(
        st.binary(max_size=40),
        frames,
        frames.flatmap(lambda f: st.integers(0, len(f)).map(lambda k: f[:k])),  # truncated
        st.sampled_from([b"*1\r\n$999999999999\r\n", b"*-5\r\n", b"*3\r\n$1\r\na", b'"\r\n',
                         b"*1\r\n*1\r\n*1\r\n", b"\r\n\r\n", b"%2\r\n", b"$5\r\nhello\r\n",
                         b"*2\r\n$4\r\nECHO\r\n$-7\r\n", b"*1\r\n$2\r\nab"]),
    )
    return st.lists(garbage, min_size=1, max_size=6)


class MemorySocket:
    """The client's side, in memory: the chunks, then EOF; everything sent is kept."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.received = bytearray()

    async def recv(self, size: int) -> bytes:
        await trio.lowlevel.checkpoint()
        return self.chunks.pop(0) if self.chunks else b""

    async def send(self, data: Any) -> int:
        await trio.lowlevel.checkpoint()
        self.received += data
        return len(data)

    def send_nowait(self, data: Any) -> int:
        self.received += data
        return len(data)

    def recv_nowait(self, size: int) -> bytes | None:
        return self.chunks.pop(0) if self.chunks else b""

    async def wait_readable_first(self) -> bool:
        await trio.lowlevel.checkpoint()
        return True


def _replies(data: bytes) -> list[Any]:
    """`data` as complete RESP replies (hiredis raises on a malformed one)."""
    reader = hiredis.Reader()
    reader.feed(data)
    out: list[Any] = []
    while (reply := reader.gets()) is not False:
        out.append(reply)
    assert reader.gets() is False and not reader.has_data(), "a reply was cut short"
    return out


def test_fuzz_the_session_in_memory() -> None:
    load_all()
    ctx = make_context(ServerConfig(storage=False, http_port=None, resp_port=None))
    front = Front()
    ctx.metrics.resp = front

    @settings(max_examples=2500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_chunks(WORDS + KILL_WORDS))
    def run(chunks: list[bytes]) -> None:
        s = Session(ctx, front)
        sock = MemorySocket(chunks)

        async def serve() -> bool:
            with trio.fail_after(60):  # virtual time: a hang fails, a BLOCK times out
                return await drive(s, cast(Any, sock), NEED_DATA, until_idle=False)

        idle = trio.run(serve, clock=trio.testing.MockClock(autojump_threshold=0))
        s.close()
        assert idle is False  # every input ends in a close (at the latest, its EOF)
        replies = _replies(bytes(sock.received))
        errors = [r for r in replies if isinstance(r, hiredis.ReplyError)]
        for e in errors[:-1]:
            assert not str(e).startswith("Protocol error"), "a protocol error must be the last reply"
        assert not s.client.blocked and s.client.id not in front.clients

    run()
    assert front.stats.unexpected_errors == 0 and not front.clients


def _check_over_socket(port: int, chunks: list[bytes], witness: socket.socket) -> None:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        try:
            for c in chunks:
                s.sendall(c)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server closed first (a protocol error, QUIT) while we were sending
        try:
            data = read_to_eof(s, timeout=5)  # the server closes: never a hang
        except ConnectionResetError:
            data = b""  # it closed with our unread input: the kernel resets
        _replies(data)  # complete replies only
    finally:
        s.close()
    witness.sendall(b"PING\r\n")  # and the other clients are still served
    assert read_until(witness, b"\r\n", timeout=5) == b"+PONG\r\n"


def test_fuzz_each_io_path(inproc: InProc) -> None:
    witness = inproc.connect()

    @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_chunks(WORDS))
    def run(chunks: list[bytes]) -> None:
        _check_over_socket(inproc.port, chunks, witness)

    run()
    assert inproc.ctx.metrics.resp.stats.unexpected_errors == 0
