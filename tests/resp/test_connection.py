"""End to end over real sockets, on each I/O path (conftest.RESP_IO): a protocol error and the
close that follows it, a pipeline of thousands in one write (many flushes), and a client that
does not read its replies yet (its input still runs; its output is bounded). The session's behaviour itself is
tested in memory (test_session.py); the fuzz is in test_fuzz.py."""

from __future__ import annotations

from tests.resp.conftest import InProc, frame, read_to_eof, read_until, wait_for


def test_a_protocol_error_replies_then_the_socket_closes(inproc: InProc) -> None:
    s = inproc.connect()
    s.sendall(frame(b"PING") + b"*1\r\n$x\r\n" + frame(b"PING"))
    assert read_to_eof(s) == b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    s2 = inproc.connect()
    s2.sendall(b'SET "unbalanced\r\n')
    assert read_to_eof(s2) == b"-ERR Protocol error: unbalanced quotes in request\r\n"


def test_pipeline_of_thousands_in_one_write(inproc: InProc) -> None:
    s = inproc.connect()
    n = 5000
    s.sendall(b"".join(frame(b"XADD", b"p", b"*", b"i", b"%d" % i) for i in range(n))
              + frame(b"XLEN", b"p"))
    out = read_until(s, b":%d\r\n" % n, timeout=20)
    assert out.count(b"\r\n$") + out.startswith(b"$") == n
    assert out.endswith(b":%d\r\n" % n)


def _xrange_client(srv: InProc) -> tuple[str, int]:
    """(events, omem) of the client whose last command was XRANGE, from CLIENT LIST."""
    w = srv.connect()
    try:
        w.sendall(frame(b"CLIENT", b"LIST"))
        listing = read_until(w, b"\n\r\n").decode()
    finally:
        w.close()
    line = next(x for x in listing.splitlines() if "cmd=xrange" in x or "cmd=xadd" in x)
    fields = dict(f.split("=", 1) for f in line.split())
    return fields["events"], int(fields["omem"])


def test_a_client_that_does_not_read_yet_is_served_in_full(inproc: InProc) -> None:
    """Its replies are kept (within client-output-limit) while its input is still read and
    run, as redis-server does: nothing waits for the client to read first."""
    s = inproc.connect(timeout=30)
    s.sendall(frame(b"XADD", b"r", b"*", b"f", b"y" * 50_000))
    read_until(s, b"-1\r\n")
    n = 400  # 400 x 50 KB = 20 MB of replies (more than the kernel buffers), not read yet
    s.sendall(frame(b"XRANGE", b"r", b"-", b"+") * n + frame(b"XADD", b"r", b"*", b"last", b"1"))
    wait_for(lambda: inproc.ctx.engine.find("r").count == 2, timeout=20)  # all of it ran
    events, omem = _xrange_client(inproc)
    assert events == "w" and omem <= inproc.ctx.config.client_output_limit
    got = 0
    while got < n * 50_000:  # every reply arrives once the client reads
        chunk = s.recv(1 << 20)
        assert chunk
        got += chunk.count(b"y")
    assert got == n * 50_000
    wait_for(lambda: _xrange_client(inproc) == ("r", 0))
