"""Hostile or unlucky input on both RESP I/O paths (issue 10): a bug in a command never ends
the connection or the process (item 2), an HTTP request sent to the RESP port runs nothing
(item 4), and a refused key name reads back as the client wrote it (item 19)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.resp.conftest import RESP_IO, InProc, frame, read_to_eof, read_until, start_inproc
from topicsrv.resp.commands.base import REGISTRY, Pending

INTERNAL = b"-ERR internal error (logged)\r\n"


@pytest.fixture(params=RESP_IO)
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(resp_io=request.param)
    yield s
    stop()


class _FailingToken:
    async def wait(self) -> None:
        raise RuntimeError("injected: the commit wait blew up")


def _buggy_echo(ctx: Any, args: list[bytes]) -> Any:
    """ECHO with a bug chosen by its argument."""
    what = args[0]
    if what == b"raise":
        raise RuntimeError("injected: handler bug")
    if what == b"unencodable":
        return object()  # the encoder cannot send this
    if what == b"async":
        async def later() -> Any:
            raise RuntimeError("injected: async handler bug")
        return later()
    if what == b"commit":
        return Pending(_FailingToken(), b"1-1")
    return args[0]


def test_a_bug_in_a_command_answers_an_error_and_keeps_the_connection(
        srv: InProc, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(REGISTRY["echo"], "handler", _buggy_echo)
    s = srv.connect()
    s.sendall(frame(b"XADD", b"k", b"*", b"f", b"v"))
    assert read_until(s, b"\r\n").startswith(b"$")
    with caplog.at_level(logging.ERROR, logger="topicsrv.resp"):
        for bug in (b"raise", b"unencodable", b"async", b"commit"):
            s.sendall(frame(b"ECHO", bug) + frame(b"PING"))
            assert read_until(s, b"+PONG\r\n") == INTERNAL + b"+PONG\r\n", bug
        # pipelined with good commands on both sides: each still gets its own answer
        s.sendall(frame(b"ECHO", b"a") + frame(b"ECHO", b"unencodable") + frame(b"XLEN", b"k"))
        assert read_until(s, b":1\r\n") == b"$1\r\na\r\n" + INTERNAL + b":1\r\n"
    assert srv.ctx.metrics.resp.stats.unexpected_errors == 5
    assert sum("internal error" in r.getMessage() and r.exc_info is not None
               for r in caplog.records) == 5  # logged with the traceback
    other = srv.connect()  # and the server goes on serving everyone
    other.sendall(frame(b"PING"))
    assert read_until(other, b"\r\n") == b"+PONG\r\n"


def test_a_bug_in_a_coalesced_xadd_run_answers_each_command(
        srv: InProc, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = srv.ctx.engine
    real_write = engine.write

    def write(name: str, recs: Any, *a: Any, **kw: Any) -> Any:
        if name == "boom":
            raise RuntimeError("injected: engine bug")
        return real_write(name, recs, *a, **kw)

    monkeypatch.setattr(engine, "write", write)
    s = srv.connect()
    s.sendall(frame(b"XADD", b"boom", b"*", b"f", b"1") * 3 + frame(b"XADD", b"ok", b"*", b"f", b"v")
              + frame(b"PING"))
    out = read_until(s, b"+PONG\r\n")
    assert out.startswith(INTERNAL * 3 + b"$") and out.endswith(b"+PONG\r\n")


def _keeper(srv: InProc) -> Any:
    """A connection that wrote the key `keep` (a FLUSHALL that ran would remove it)."""
    w = srv.connect()
    w.sendall(frame(b"XADD", b"keep", b"*", b"f", b"v"))
    assert read_until(w, b"\r\n").startswith(b"$")
    return w


HTTP_ATTACK = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nFLUSHALL\r\n"


def test_http_sent_to_the_resp_port_closes_before_anything_after_it_runs(
        srv: InProc, caplog: pytest.LogCaptureFixture) -> None:
    """End to end on each I/O path; the other forms (any case, `Host:` first, multibulk) are
    in test_session.py."""
    w = _keeper(srv)
    with caplog.at_level(logging.WARNING, logger="topicsrv.resp"):
        s = srv.connect()
        s.sendall(HTTP_ATTACK)
        out = read_to_eof(s)
    assert b"+OK" not in out and b"POST" not in out.upper()  # no answer to POST/Host:
    w.sendall(frame(b"EXISTS", b"keep"))
    assert read_until(w, b"\r\n") == b":1\r\n"  # FLUSHALL never ran
    assert any("Possible SECURITY ATTACK detected" in r.getMessage() for r in caplog.records)
    assert srv.ctx.metrics.resp.stats.security_attacks == 1


# a TLS 1.2 ClientHello whose random/session-ticket bytes hold a command line (the DNS
# rebinding "TLS poison" attack): the record header, then binary with NULs, then FLUSHALL
TLS_POISON = (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(1, 32))
              + b"\x00\x00\x20" + b"\r\nFLUSHALL\r\n" + b"\x00\x13\x01" * 8)


@pytest.mark.parametrize("attack", [TLS_POISON, b"\x01\x00\x02 x\r\nFLUSHALL\r\n"],
                         ids=["tls-client-hello", "nul-in-inline-line"])
def test_another_protocols_bytes_close_before_anything_runs(
        srv: InProc, caplog: pytest.LogCaptureFixture, attack: bytes) -> None:
    """Issue 23 item 4: no answer, FLUSHALL inside never runs, one warning, one count."""
    w = _keeper(srv)
    with caplog.at_level(logging.WARNING, logger="topicsrv.resp"):
        s = srv.connect()
        s.sendall(attack)
        assert read_to_eof(s) == b""  # closed without a reply
        again = srv.connect()
        again.sendall(attack)
        assert read_to_eof(again) == b""
    w.sendall(frame(b"EXISTS", b"keep"))
    assert read_until(w, b"\r\n") == b":1\r\n"  # FLUSHALL never ran
    warnings = [r for r in caplog.records if "SECURITY ATTACK" in r.getMessage()]
    assert len(warnings) == 1  # logged once (at most once a minute), counted twice
    assert srv.ctx.metrics.resp.stats.security_attacks == 2


def test_refused_key_names_are_shown_readably(srv: InProc) -> None:
    s = srv.connect()
    for key, shown in [(b"orders{eu}", "'orders{eu}'"),
                       ("café-€".encode(), "'café-€'"),
                       (b"bin\xff\x00key", "'bin\\xff\\x00key'"),
                       (b"it's", "'it\\'s'")]:
        s.sendall(frame(b"XADD", key, b"*", b"f", b"v"))
        line = read_until(s, b"\r\n").decode("utf-8")
        assert line.startswith(f"-ERR invalid topic name {shown}: 1-255 characters of "), line
