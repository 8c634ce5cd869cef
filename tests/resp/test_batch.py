"""XADD coalescing (topicsrv/resp/batch.py) on both RESP I/O paths, through real sockets: each
command of a coalesced run gets its own reply, a bad record fails alone, a run the engine
refuses as a whole is answered command by command, and counters see every command."""

from __future__ import annotations

from tests.resp.conftest import InProc, frame, read_until


def test_coalesced_xadds_get_their_own_replies_and_a_bad_one_fails_alone(inproc: InProc) -> None:
    s = inproc.connect(timeout=20)
    big = b"x" * ((1 << 20) + 1)  # over the per-record limit: this XADD alone fails
    s.sendall(frame(b"XADD", b"c", b"*", b"f", b"1") + frame(b"XADD", b"c", b"*", b"f", big)
              + frame(b"XADD", b"c", b"*", b"f", b"3", b"g", b"4")
              + frame(b"XADD", b"c", b"MAXLEN", b"5", b"*", b"f", b"5")  # an option: own write
              + frame(b"XADD", b"c", b"*", b"f") + frame(b"XLEN", b"c"))
    out = read_until(s, b":3\r\n", timeout=20)
    parts = out.split(b"\r\n")
    id1, id3, id5 = parts[1], parts[4], parts[6]
    assert parts[2].startswith(b"-") and b"limit" in parts[2]
    assert parts[7] == b"-ERR wrong number of arguments for 'xadd' command"
    seqs = [int(i.split(b"-")[1]) for i in (id1, id3, id5)]
    assert seqs == [seqs[0], seqs[0] + 1, seqs[0] + 2]
    s.sendall(frame(b"XRANGE", b"c", b"-", b"+"))
    rng = read_until(s, b"$1\r\n5\r\n")
    assert b"$1\r\n3\r\n$1\r\ng\r\n$1\r\n4\r\n" in rng and b"x" * 100 not in rng


def test_a_run_the_engine_refuses_answers_each_command_as_alone(inproc: InProc) -> None:
    s = inproc.connect()
    s.sendall(frame(b"XADD", b"", b"*", b"f", b"v"))
    alone = read_until(s, b"\r\n")
    assert alone.startswith(b"-")
    s.sendall(frame(b"XADD", b"", b"*", b"f", b"v") * 3 + frame(b"PING"))
    assert read_until(s, b"+PONG\r\n") == alone * 3 + b"+PONG\r\n"


def test_total_commands_count_every_coalesced_xadd(inproc: InProc) -> None:
    stats = inproc.ctx.metrics.resp.stats
    before = stats.total_commands
    s = inproc.connect()
    s.sendall(frame(b"XADD", b"t", b"*", b"f", b"v") * 10 + frame(b"PING"))
    read_until(s, b"+PONG\r\n")
    assert stats.total_commands - before == 11


def test_a_memory_limit_keeps_coalescing_and_refuses_each_xadd_past_it() -> None:
    from tests.resp.conftest import start_inproc

    srv, stop = start_inproc(max_memory=1 << 40)  # a limit far away: runs still coalesce
    try:
        writes = srv.ctx.engine.stats["writes"]
        s = srv.connect()
        s.sendall(frame(b"XADD", b"m", b"*", b"f", b"v") * 10 + frame(b"PING"))
        read_until(s, b"+PONG\r\n")
        assert srv.ctx.engine.stats["writes"] - writes == 1  # one engine write for the run
        srv.ctx.memory.limit = 1  # now every XADD is over it
        s.sendall(frame(b"XADD", b"m", b"*", b"f", b"v") * 3 + frame(b"XLEN", b"m"))
        oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
        assert read_until(s, b":10\r\n") == oom * 3 + b":10\r\n"
    finally:
        stop()


def test_a_plain_xadd_alone_is_answered_and_counted_as_by_the_dispatcher(inproc: InProc) -> None:
    """A P1 XADD is a run of one (batch.py Rule 1): one engine write, its own ID, one call in
    INFO commandstats; a bad record alone is a failed call with the handler's error."""
    s = inproc.connect(timeout=20)
    s.sendall(frame(b"CONFIG", b"RESETSTAT"))
    read_until(s, b"+OK\r\n")
    writes = inproc.ctx.engine.stats["writes"]
    s.sendall(frame(b"XADD", b"lone", b"*", b"f", b"v"))
    reply = read_until(s, b"\r\n")
    assert reply.startswith(b"$") and inproc.ctx.engine.stats["writes"] - writes == 1
    s.sendall(frame(b"XADD", b"lone", b"*", b"f", b"x" * ((1 << 20) + 1)))
    assert read_until(s, b"\r\n").startswith(b"-")
    s.sendall(frame(b"XLEN", b"lone") + frame(b"INFO", b"commandstats"))
    out = read_until(s, b"cmdstat_xlen").decode()
    assert out.startswith(":1\r\n")
    line = next(ln for ln in out.split("\r\n") if ln.startswith("cmdstat_xadd:"))
    assert line.startswith("cmdstat_xadd:calls=2,") and line.endswith(",failed_calls=1")
