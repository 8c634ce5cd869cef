"""Inputs built to stall or bloat the server, on both RESP I/O paths (issue 10): glob patterns
that made the old matcher backtrack exponentially (item 7) and multibulk headers announcing a
billion arguments (item 9)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator

import pytest

from tests.resp.conftest import RESP_IO, InProc, frame, read_to_eof, read_until, start_inproc
from topicsrv.context import ServerConfig, make_context
from topicsrv.resp.commands import load_all
from topicsrv.resp.commands.base import Front
from topicsrv.resp.session import CLOSE, NEED_DATA, Session

A60 = b"a" * 60


@pytest.fixture(params=RESP_IO)
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(resp_io=request.param)
    yield s
    stop()


def _timed(srv: InProc, *cmd: bytes, until: bytes) -> tuple[bytes, float]:
    s = srv.connect(timeout=30)
    t = time.perf_counter()
    s.sendall(frame(*cmd))
    out = read_until(s, until, timeout=30)
    return out, time.perf_counter() - t


def test_pathological_glob_patterns_answer_at_once(srv: InProc) -> None:
    s = srv.connect()
    for name in (A60, b"hello", b"hallo", A60 + b"b", b"a" * 255):
        s.sendall(frame(b"XADD", name, b"*", b"f", b"v"))
        read_until(s, b"\r\n")
    # 9.2 s with the backtracking matcher on the 60-char name alone (x6 per extra `*a`)
    out, took = _timed(srv, b"KEYS", b"*a*a*a*a*a*a*a*b", until=b"\r\n" + A60 + b"b\r\n")
    assert out == b"*1\r\n$61\r\n" + A60 + b"b\r\n"
    assert took < 0.5
    out, took = _timed(srv, b"KEYS", b"*a" * 40 + b"*c", until=b"\r\n")
    assert out == b"*0\r\n" and took < 0.5
    out, took = _timed(srv, b"SCAN", b"0", b"MATCH", b"*a*a*a*a*a*a*a*a*a*b", b"COUNT", b"100",
                       until=b"\r\n" + A60 + b"b\r\n")
    assert out.endswith(b"*1\r\n$61\r\n" + A60 + b"b\r\n") and took < 0.5
    out, _ = _timed(srv, b"KEYS", b"h[^e]llo", until=b"\r\n")  # Redis's class syntax
    assert out == b"*1\r\n$5\r\nhallo\r\n"


def test_a_pattern_too_long_to_compile_is_refused(srv: InProc) -> None:
    out, took = _timed(srv, b"KEYS", b"[a-z]" * 2000, until=b"\r\n")
    assert out == b"-ERR glob pattern too long (10000 bytes; the limit is 8192)\r\n"
    assert took < 0.5


def test_a_huge_multibulk_header_is_refused_without_allocating(srv: InProc) -> None:
    tracemalloc.start()
    try:
        for header in (b"*1000000000\r\n", b"*1048577\r\n", b"*99999999999999999999\r\n"):
            s = srv.connect()
            s.sendall(header)
            assert read_to_eof(s) == b"-ERR Protocol error: invalid multibulk length\r\n"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # a billion-slot argv would be 8 GB; hiredis would try
    w = srv.connect()
    w.sendall(frame(b"PING"))
    assert read_until(w, b"\r\n") == b"+PONG\r\n"


def test_a_huge_multibulk_header_split_across_reads_is_refused() -> None:
    """The header's digits arrive in two reads (in memory: exactly two, no timing)."""
    load_all()
    s = Session(make_context(ServerConfig(storage=False, http_port=None, resp_port=None)), Front())
    tracemalloc.start()
    try:
        s.receive_data(b"*10")
        assert s.step() is NEED_DATA and not s.out
        s.receive_data(b"00000000\r\n$1\r\nx\r\n")
        assert s.step() is CLOSE
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.data_to_send() == b"-ERR Protocol error: invalid multibulk length\r\n"
    assert peak < 4 << 20
