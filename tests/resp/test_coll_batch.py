"""Runs of list and hash writes (topicsrv/resp/batch_colls.py Rule 4, engine/keyspace/space.py
Rule 9) through real sockets: a pipelined run of LPUSH, RPOP or HSET commits each command as
alone (its own reply, its own errors, WATCH and waiters told) and journals the run's
operations once, in commit order; replaying that one journaled operation rebuilds the same
keys."""

from __future__ import annotations

from typing import Any

import pytest

from tests.resp.conftest import InProc, frame, read_until
from tests.resp.test_string_batch import _ops  # every keyspace operation journaled
from topicsrv.engine.core import Engine


def _replayed(ops: list[list[Any]], base: list[Any]) -> Engine:
    engine = Engine()
    engine.keyspace.apply(base)
    for op in ops:
        engine.keyspace.apply(op)
    return engine


def test_a_run_of_pushes_is_journaled_once_and_each_is_answered(
        inproc: InProc, monkeypatch: pytest.MonkeyPatch) -> None:
    s = inproc.connect()
    s.sendall(frame(b"SET", b"str", b"x") + frame(b"RPUSH", b"a", b"0"))
    read_until(s, b":1\r\n")
    base = inproc.ctx.engine.keyspace.snapshot()
    ops = _ops(inproc, monkeypatch)
    s.sendall(frame(b"LPUSH", b"a", b"1") + frame(b"lpush", b"b", b"x", b"y")
              + frame(b"LPUSH", b"str", b"z") + frame(b"LPUSH", b"a", b"2", b"3")
              + frame(b"PING"))
    assert read_until(s, b"+PONG\r\n") == (
        b":2\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        b":4\r\n+PONG\r\n")
    assert [[ch[:2] for ch in op] for op in ops] == [[("L", "a"), ("L", "b"), ("L", "a")]]
    s.sendall(frame(b"RPOP", b"a") + frame(b"RPOP", b"b") + frame(b"RPOP", b"b")
              + frame(b"RPOP", b"b") + frame(b"RPOP", b"nope") + frame(b"LRANGE", b"a", b"0", b"-1"))
    assert read_until(s, b"$1\r\n1\r\n") == (
        b"$1\r\n0\r\n$1\r\nx\r\n$1\r\ny\r\n$-1\r\n$-1\r\n*3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n")
    assert len(ops) == 2 and [ch[1] for ch in ops[1]] == ["a", "b", "b"]
    ks = inproc.ctx.engine.keyspace
    again = _replayed(ops, base).keyspace
    assert {n: list(v) for n, v in again.colls.items()} == \
        {n: list(v) for n, v in ks.colls.items()} == {"a": [b"3", b"2", b"1"]}


def test_a_run_of_hsets_is_journaled_once(inproc: InProc,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _ops(inproc, monkeypatch)
    s = inproc.connect()
    s.sendall(frame(b"HSET", b"h", b"f", b"1") + frame(b"HSET", b"h", b"f", b"2", b"g", b"3")
              + frame(b"HSET", b"h2", b"f") + frame(b"HSET", b"h2", b"f", b"v")
              + frame(b"HGETALL", b"h"))
    assert read_until(s, b"$1\r\n3\r\n") == (
        b":1\r\n:1\r\n-ERR wrong number of arguments for 'hset' command\r\n:1\r\n"
        b"*4\r\n$1\r\nf\r\n$1\r\n2\r\n$1\r\ng\r\n$1\r\n3\r\n")
    assert [[ch[1] for ch in op] for op in ops] == [["h", "h"], ["h2"]]
    again = _replayed(ops, []).keyspace
    assert list(again.colls["h"].items()) == [(b"f", b"2"), (b"g", b"3")]


def test_watch_and_a_blocked_pop_see_every_command_of_a_run(inproc: InProc) -> None:
    a, b, c = inproc.connect(), inproc.connect(), inproc.connect()
    a.sendall(frame(b"WATCH", b"w") + frame(b"MULTI") + frame(b"LPUSH", b"x", b"1"))
    assert read_until(a, b"+QUEUED\r\n") == b"+OK\r\n+OK\r\n+QUEUED\r\n"
    c.sendall(frame(b"BRPOP", b"q", b"0"))
    b.sendall(frame(b"CLIENT", b"LIST"))
    read_until(b, b"\r\n")
    for _ in range(100):  # c blocked
        b.sendall(frame(b"INFO", b"clients"))
        if b"blocked_clients:1" in read_until(b, b"\r\n\r\n"):
            break
    b.sendall(frame(b"LPUSH", b"z", b"1") + frame(b"LPUSH", b"w", b"2")
              + frame(b"LPUSH", b"q", b"e1") + frame(b"LPUSH", b"q", b"e2") + frame(b"PING"))
    assert read_until(b, b"+PONG\r\n") == b":1\r\n:1\r\n:1\r\n:2\r\n+PONG\r\n"
    assert read_until(c, b"e1\r\n") == b"*2\r\n$1\r\nq\r\n$2\r\ne1\r\n"
    a.sendall(frame(b"EXEC"))
    assert read_until(a, b"\r\n") == b"*-1\r\n"  # the second LPUSH of b's run touched w
    b.sendall(frame(b"LRANGE", b"q", b"0", b"-1"))
    assert read_until(b, b"e2\r\n") == b"*1\r\n$2\r\ne2\r\n"
