"""The blocking list pops (issue 35) on a real RESP front in process: clients served in the
order they blocked, several keys in argument order, a push inside MULTI/EXEC wakes them only
after EXEC (and they see its end state), timeouts, CLIENT UNBLOCK, and blocked clients in
INFO and CLIENT LIST. Waits for "blocked" are polls of INFO, never sleeps of a guessed
length."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.resp.conftest import RESP_IO, InProc, start_inproc


@pytest.fixture(params=RESP_IO, scope="module")
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(resp_io=request.param)
    yield s
    stop()


def client(srv: InProc) -> redis.Redis:
    return redis.Redis(port=srv.port, socket_timeout=20)


def blocked(r: redis.Redis) -> int:
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r: redis.Redis, n: int) -> None:
    deadline = time.monotonic() + 10
    while blocked(r) < n:
        assert time.monotonic() < deadline, f"never {n} blocked clients"
        time.sleep(0.005)


def start(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def test_clients_are_served_in_the_order_they_blocked(srv: InProc) -> None:
    r = client(srv)
    r.delete("fifo")
    runs = []
    for i in range(3):
        runs.append(start(lambda: client(srv).blpop(["fifo"], 0)))
        wait_blocked(r, i + 1)
    assert r.rpush("fifo", "a", "b", "c") == 3
    for t, _ in runs:
        t.join(10)
    assert [out[0] for _, out in runs] == [(b"fifo", b"a"), (b"fifo", b"b"), (b"fifo", b"c")]
    assert r.exists("fifo") == 0 and blocked(r) == 0


def test_several_keys_in_argument_order_and_one_push_serves_one_client(srv: InProc) -> None:
    r = client(srv)
    r.delete("k1", "k2")
    t1, out1 = start(lambda: client(srv).brpop(["k1", "k2"], 0))
    wait_blocked(r, 1)
    t2, out2 = start(lambda: client(srv).brpop(["k2"], 0))
    wait_blocked(r, 2)
    r.rpush("k2", "x")
    t1.join(10)
    assert out1 == [(b"k2", b"x")] and blocked(r) == 1  # the first blocked got it
    r.rpush("k2", "y")
    t2.join(10)
    assert out2 == [(b"k2", b"y")]


def test_a_push_inside_exec_wakes_only_after_it(srv: InProc) -> None:
    r = client(srv)
    r.delete("tx")
    t, out = start(lambda: client(srv).blpop(["tx"], 0))
    wait_blocked(r, 1)
    pipe = r.pipeline(transaction=True)
    pipe.lpush("tx", "a").lpush("tx", "b").lpush("tx", "c")
    assert pipe.execute() == [1, 2, 3]
    t.join(10)
    assert out == [(b"tx", b"c")]  # the list as EXEC left it (Valkey's "MULTI/EXEC is isolated")
    assert r.lrange("tx", 0, -1) == [b"b", b"a"]


def test_timeouts_and_client_unblock(srv: InProc) -> None:
    r = client(srv)
    r.delete("none")
    assert client(srv).blpop(["none"], 0.05) is None
    c = client(srv)
    cid = c.client_id()
    t, out = start(lambda: c.blmove("none", "dst", 0, "LEFT", "RIGHT"))
    wait_blocked(r, 1)
    listed = [x for x in r.client_list() if int(x["id"]) == cid]
    assert listed and "b" in listed[0]["flags"]
    assert r.client_unblock(cid) is True
    t.join(10)
    assert out == [None] and blocked(r) == 0
    c2 = client(srv)
    cid2 = c2.client_id()
    errors: list[str] = []

    def pop() -> Any:
        try:
            return c2.blpop(["none"], 0)
        except redis.ResponseError as e:
            errors.append(str(e))
            return None
    t, out = start(pop)
    wait_blocked(r, 1)
    assert r.client_unblock(cid2, error=True) is True
    t.join(10)
    assert errors == ["UNBLOCKED client unblocked via CLIENT UNBLOCK"]


def test_blmove_waits_and_moves_exactly_once(srv: InProc) -> None:
    r = client(srv)
    r.delete("src", "dst")
    t, out = start(lambda: client(srv).blmove("src", "dst", 0, "RIGHT", "LEFT"))
    wait_blocked(r, 1)
    r.rpush("src", "1", "2")
    t.join(10)
    assert out == [b"2"] and r.lrange("src", 0, -1) == [b"1"] and r.lrange("dst", 0, -1) == [b"2"]


def test_a_key_of_another_kind_keeps_the_client_waiting(srv: InProc) -> None:
    r = client(srv)
    r.delete("turns")
    t, out = start(lambda: client(srv).blpop(["turns"], 0))
    wait_blocked(r, 1)
    r.set("turns", "a string")
    r.delete("turns")
    assert blocked(r) == 1 and out == []
    r.rpush("turns", "x")
    t.join(10)
    assert out == [(b"turns", b"x")]


def test_a_client_that_leaves_gets_nothing_and_loses_nothing(srv: InProc) -> None:
    """A blocked client that disconnects is never served: the element goes to the next."""
    import socket

    r = client(srv)
    r.delete("gone")
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$4\r\ngone\r\n$1\r\n0\r\n")
    wait_blocked(r, 1)
    s.close()
    deadline = time.monotonic() + 10
    while blocked(r):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    t, out = start(lambda: client(srv).blpop(["gone"], 0))
    wait_blocked(r, 1)
    r.rpush("gone", "job")
    t.join(10)
    assert out == [(b"gone", b"job")] and r.llen("gone") == 0


def test_a_pipelined_push_and_pop_leaves_the_element_to_the_client_blocked_first(
        srv: InProc) -> None:
    """Valkey's "Unblock fairness is kept while pipelining"."""
    import socket

    r = client(srv)
    r.delete("fair")
    t1, out1 = start(lambda: client(srv).blpop(["fair"], 0))
    wait_blocked(r, 1)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"LPUSH fair 1\r\nBLPOP fair 0\r\n")
    t1.join(10)
    assert out1 == [(b"fair", b"1")]
    assert s.recv(100) == b":1\r\n"
    wait_blocked(r, 1)
    r.lpush("fair", "2")
    got = b""
    while not got.endswith(b"2\r\n"):
        got += s.recv(100)
    assert got == b"*2\r\n$4\r\nfair\r\n$1\r\n2\r\n"
    s.close()
