"""SET/GET runs (topicsrv/resp/batch.py Rules 7-10, a lone SET or GET being a run of one) on both RESP I/O paths, through real
sockets: a pipelined run of plain SETs is one keyspace operation with every reply its own, a
run of GETs answers each key (value, nil, WRONGTYPE) in order, and what must see each command
(WATCH, MULTI, keyspace notifications, INFO commandstats, total_commands) still does."""

from __future__ import annotations

from typing import Any

import pytest

from tests.resp.conftest import InProc, frame, read_until


def _ops(srv: InProc, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Every keyspace operation journaled from now on."""
    journal = srv.ctx.engine.journal
    seen: list[list[Any]] = []
    orig = journal.keyspace_changed

    def spy(op: list[Any]) -> Any:
        seen.append(list(op))
        return orig(op)

    monkeypatch.setattr(journal, "keyspace_changed", spy)
    return seen


def test_a_run_of_sets_is_one_operation_and_each_is_answered(inproc: InProc,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _ops(inproc, monkeypatch)
    s = inproc.connect()
    s.sendall(frame(b"XADD", b"t", b"*", b"f", b"v"))
    read_until(s, b"\r\n")
    s.sendall(frame(b"EXPIRE", b"a", b"100"))  # no key yet: 0
    read_until(s, b":0\r\n")
    s.sendall(frame(b"SET", b"a", b"1") + frame(b"set", b"b", b"2") + frame(b"Set", b"a", b"3")
              + frame(b"SET", b"t", b"over-a-topic") + frame(b"SET", b"c", b"4", b"EX", b"100")
              + frame(b"SET", b"d") + frame(b"MGET", b"a", b"b", b"t", b"c"))
    out = read_until(s, b"$1\r\n4\r\n")
    assert out == (b"+OK\r\n" * 5 + b"-ERR wrong number of arguments for 'set' command\r\n"
                   + b"*4\r\n$1\r\n3\r\n$1\r\n2\r\n$12\r\nover-a-topic\r\n$1\r\n4\r\n")
    sets = [op for op in ops if op and op[0][0] == "s"]
    assert [[ch[1] for ch in op] for op in sets] == [["a", "b", "a", "t"], ["c"]]
    s.sendall(frame(b"TYPE", b"t"))
    assert read_until(s, b"\r\n") == b"+string\r\n"


def test_a_run_of_gets_answers_each_key_in_order(inproc: InProc) -> None:
    s = inproc.connect()
    s.sendall(frame(b"SET", b"a", b"1") + frame(b"XADD", b"t", b"*", b"f", b"v"))
    read_until(s, b"-1\r\n")
    s.sendall(frame(b"GET", b"a") + frame(b"GET", b"t") + frame(b"get", b"nope")
              + frame(b"GET", b"a") + frame(b"PING"))
    assert read_until(s, b"+PONG\r\n") == (
        b"$1\r\n1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        b"$-1\r\n$1\r\n1\r\n+PONG\r\n")


def test_runs_are_counted_per_command(inproc: InProc) -> None:
    stats = inproc.ctx.metrics.resp.stats  # type: ignore[attr-defined]
    s = inproc.connect()
    s.sendall(frame(b"CONFIG", b"RESETSTAT"))
    read_until(s, b"+OK\r\n")
    before = stats.total_commands
    s.sendall(frame(b"XADD", b"t", b"*", b"f", b"v"))
    read_until(s, b"\r\n")
    s.sendall(frame(b"SET", b"k", b"v") * 7 + frame(b"GET", b"k") * 4 + frame(b"GET", b"t") * 2
              + frame(b"INFO", b"commandstats") + frame(b"PING"))
    info = read_until(s, b"+PONG\r\n").decode()
    lines = {ln.split(":")[0]: ln.split(":")[1] for ln in info.split("\r\n") if ln.startswith("cmdstat_")}
    assert lines["cmdstat_set"].startswith("calls=7,") and lines["cmdstat_set"].endswith(
        ",rejected_calls=0,failed_calls=0")
    assert lines["cmdstat_get"].startswith("calls=6,") and lines["cmdstat_get"].endswith(
        ",rejected_calls=0,failed_calls=2")
    assert stats.total_commands - before == 1 + 7 + 6 + 2


def test_watch_multi_and_notifications_see_every_set(inproc: InProc,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = inproc.connect(), inproc.connect()
    a.sendall(frame(b"WATCH", b"k") + frame(b"MULTI") + frame(b"SET", b"x", b"1")
              + frame(b"SET", b"y", b"2"))
    assert read_until(a, b"+QUEUED\r\n+QUEUED\r\n") == b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
    b.sendall(frame(b"SET", b"z", b"1") + frame(b"SET", b"k", b"2") + frame(b"PING"))
    read_until(b, b"+PONG\r\n")
    a.sendall(frame(b"EXEC"))
    assert read_until(a, b"\r\n") == b"*-1\r\n"  # the second SET of b's run touched k
    ops = _ops(inproc, monkeypatch)
    b.sendall(frame(b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"))
    read_until(b, b"+OK\r\n")
    b.sendall(frame(b"SET", b"p", b"1") + frame(b"SET", b"q", b"2") + frame(b"PING"))
    read_until(b, b"+PONG\r\n")
    assert [[ch[1] for ch in op] for op in ops] == [["p"], ["q"]]  # not coalesced while on


def test_a_run_of_gets_expires_due_keys_and_records_each_access(
        srv: tuple[InProc, Any]) -> None:
    """The run reads the clock once (space.py get_many) and still answers like GETs alone: a
    key whose TTL passed is nil (and gone), and every key read restarts its OBJECT IDLETIME."""
    s, clock = srv
    c = s.connect()
    c.sendall(frame(b"SET", b"old", b"1") + frame(b"SET", b"ttl", b"2", b"PX", b"1500")
              + frame(b"SET", b"idle", b"3"))
    read_until(c, b"+OK\r\n+OK\r\n+OK\r\n")
    clock.advance(10_000)  # 10 s: `ttl` is due, the others have been idle 10 s
    c.sendall(frame(b"GET", b"old") + frame(b"GET", b"ttl") + frame(b"GET", b"old")
              + frame(b"OBJECT", b"IDLETIME", b"old") + frame(b"OBJECT", b"IDLETIME", b"idle")
              + frame(b"EXISTS", b"ttl"))
    assert read_until(c, b":0\r\n:10\r\n:0\r\n") == (
        b"$1\r\n1\r\n$-1\r\n$1\r\n1\r\n:0\r\n:10\r\n:0\r\n")


@pytest.mark.parametrize("pipelined", [False, True])
def test_a_set_over_a_due_key_expires_it_first(srv: tuple[InProc, Any], pipelined: bool) -> None:
    """As redis-server's SET (its lookupKeyWrite): a key whose TTL passed is expired before it is
    overwritten, so INFO's expired_keys counts it, alone or in a run, and the new value has no
    TTL."""
    s, clock = srv
    c = s.connect()
    c.sendall(frame(b"SET", b"a", b"1", b"PX", b"100") + frame(b"SET", b"b", b"1", b"PX", b"100"))
    read_until(c, b"+OK\r\n+OK\r\n")
    clock.advance(1_000)
    sets = frame(b"SET", b"a", b"2") + frame(b"SET", b"b", b"2")
    if pipelined:
        c.sendall(sets)
        read_until(c, b"+OK\r\n+OK\r\n")
    else:
        for one in (sets[:len(sets) // 2], sets[len(sets) // 2:]):
            c.sendall(one)
            read_until(c, b"+OK\r\n")
    c.sendall(frame(b"INFO", b"stats") + frame(b"TTL", b"a") + frame(b"GET", b"b"))
    out = read_until(c, b"$1\r\n2\r\n").decode()
    assert "expired_keys:2\r\n" in out and out.endswith(":-1\r\n$1\r\n2\r\n")


def test_a_lone_set_aborts_exactly_the_transactions_watching_its_key(inproc: InProc) -> None:
    """engine/core.py Rule 4: a string change is told only to the listeners whose interest
    holds the name; WATCH's registry must still hear every watched key."""
    a, b, c = inproc.connect(), inproc.connect(), inproc.connect()
    a.sendall(frame(b"WATCH", b"k1") + frame(b"MULTI") + frame(b"GET", b"k1"))
    assert read_until(a, b"+QUEUED\r\n") == b"+OK\r\n+OK\r\n+QUEUED\r\n"
    b.sendall(frame(b"WATCH", b"k2") + frame(b"MULTI") + frame(b"GET", b"k2"))
    assert read_until(b, b"+QUEUED\r\n") == b"+OK\r\n+OK\r\n+QUEUED\r\n"
    c.sendall(frame(b"SET", b"k1", b"v"))
    read_until(c, b"+OK\r\n")
    c.sendall(frame(b"SET", b"other", b"v"))
    read_until(c, b"+OK\r\n")
    a.sendall(frame(b"EXEC"))
    b.sendall(frame(b"EXEC"))
    assert read_until(a, b"\r\n") == b"*-1\r\n"
    assert read_until(b, b"$-1\r\n") == b"*1\r\n$-1\r\n"
