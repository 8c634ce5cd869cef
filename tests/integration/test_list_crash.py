"""Real processes: lists through kill -9 and restarts (issue 35). `fsync`: every acknowledged
list write is back; `disk`: a prefix of them; `memory`: nothing. LMOVE moves each element
exactly once across a kill -9 (one keyspace operation: never in both lists, never lost), and
a checkpoint carries lists whole."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from conftest import NO_RETRY


def _states() -> list[tuple[list[bytes], list[bytes]]]:
    """(q, front) after each write of `_writes`, in order: what a prefix can leave."""
    q: list[bytes] = []
    front: list[bytes] = []
    out = [(list(q), list(front))]
    for i in range(300):
        q.append(f"v{i}".encode())
        out.append((list(q), list(front)))
        if i % 3 == 0:
            front.insert(0, str(i).encode())
            out.append((list(q), list(front)))
    q[0] = b"first"
    out.append((list(q), list(front)))
    q.insert(q.index(b"v5") + 1, b"after5")
    out.append((list(q), list(front)))
    q.remove(b"v7")
    out.append((list(q), list(front)))
    del front[50:]
    out.append((list(q), list(front)))
    return out


def _writes(r: redis.Redis) -> None:
    for i in range(300):
        r.rpush("q", f"v{i}")
        if i % 3 == 0:
            r.lpush("front", i)
    r.lset("q", 0, "first")
    r.linsert("q", "AFTER", "v5", "after5")
    r.lrem("q", 0, "v7")
    r.ltrim("front", 0, 49)


@pytest.mark.parametrize("cls", ["fsync", "disk", "memory"])
def test_kill9_under_list_writes(server_factory: Any, tmp_path: Any, cls: str) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", cls, data_dir=data)
    _writes(redis.Redis(port=srv.resp_port, socket_timeout=10))
    srv.kill()
    srv2 = server_factory("--keyspace-durability", cls, data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    got = (r2.lrange("q", 0, -1), r2.lrange("front", 0, -1))
    states = _states()
    if cls == "fsync":  # every acknowledged write
        assert got == states[-1]
        assert r2.type("q") == b"list" and r2.object("encoding", "q") == b"quicklist"
    elif cls == "memory":
        assert got == ([], []) and r2.exists("front") == 0
    else:  # disk: the state after some prefix of the acknowledged writes
        assert got in states


def test_lmove_moves_each_element_exactly_once_through_kill9(server_factory: Any,
                                                             tmp_path: Any) -> None:
    data = tmp_path / "data"
    n = 2000
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.rpush("todo", i)
    pipe.execute()
    for round_ in range(3):
        moved = 0
        while moved < 200:
            if r.lmove("todo", "done", "LEFT", "RIGHT") is None:
                break
            moved += 1
        srv.kill()
        srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
        r = redis.Redis(port=srv.resp_port, socket_timeout=10)
        todo = [int(x) for x in r.lrange("todo", 0, -1)]
        done = [int(x) for x in r.lrange("done", 0, -1)]
        assert sorted(todo + done) == list(range(n))  # each element in exactly one place
        assert done == list(range(len(done))) and len(done) == 200 * (round_ + 1)


def test_a_checkpoint_carries_lists(server_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    r.rpush("big", *[f"e{i}" * 10 for i in range(5000)])
    r.rpush("ttl", "x")
    r.pexpireat("ttl", int(time.time() * 1000) + 3_600_000)
    r.rpush("big", "last")
    srv.stop()  # a clean stop takes the final checkpoint: the restart loads the lists from it
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.llen("big") == 5001 and r2.lindex("big", -1) == b"last"
    assert r2.lindex("big", 2500) == b"e2500" * 10
    assert r2.lrange("ttl", 0, -1) == [b"x"] and r2.ttl("ttl") > 3000


@pytest.mark.slow
def test_blmove_producer_and_consumer_through_kill9_rounds(server_factory: Any,
                                                          tmp_path: Any) -> None:
    """Issue 35: a producer pushes 100,000 elements while a consumer moves them with BLMOVE,
    through kill -9 rounds at arbitrary points (threads mid-command): afterwards every element
    the producer had acknowledged is in exactly one of the two lists, once."""
    import threading

    data = tmp_path / "data"
    n, rounds = 100_000, 4
    acked = 0  # elements the producer saw acknowledged (0 .. acked-1)
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    for round_ in range(rounds):
        stop = threading.Event()
        port = srv.resp_port

        def produce(port: int = port, stop: threading.Event = stop) -> None:
            nonlocal acked
            r = redis.Redis(port=port, socket_timeout=10, retry=NO_RETRY)
            try:
                while acked < n and not stop.is_set():
                    batch = list(range(acked, min(acked + 500, n)))
                    r.rpush("todo", *batch)
                    acked = batch[-1] + 1
            except redis.RedisError:
                pass  # the kill

        def consume(port: int = port, stop: threading.Event = stop) -> None:
            r = redis.Redis(port=port, socket_timeout=10, retry=NO_RETRY)
            try:
                while not stop.is_set():
                    r.blmove("todo", "done", 0.2, "LEFT", "RIGHT")
            except redis.RedisError:
                pass

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        target = n * (round_ + 1) // rounds
        while acked < target and threads[0].is_alive():
            time.sleep(0.01)  # waiting for the producer to get that far (no timing asserted)
        srv.kill()  # kill -9 while both are mid-command
        stop.set()
        for t in threads:
            t.join(20)
        srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
        r = redis.Redis(port=srv.resp_port, socket_timeout=30)
        todo = [int(x) for x in r.lrange("todo", 0, -1)]
        done = [int(x) for x in r.lrange("done", 0, -1)]
        every = sorted(todo + done)
        assert len(every) == len(set(every))  # never in both lists, never twice
        assert set(range(acked)) <= set(every)  # nothing acknowledged is lost
        assert done == sorted(done) and todo == sorted(todo)  # FIFO kept
        assert every == list(range(len(every)))  # no gap: a push is all of its batch or none
        # a batch the server took as the kill hit, unacknowledged: the producer goes on after it
        acked = max(acked, len(every))
    assert acked == n
    assert sorted(todo + done) == list(range(n))  # each of the 100,000 in exactly one place
    assert len(done) > 0 and done == list(range(len(done)))  # moved in order, none skipped


def test_blocking_pops_of_one_element_are_journaled(server_factory: Any, tmp_path: Any) -> None:
    """BLPOP/BRPOP/BLMPOP of one element pop on RPOP's path (lists_blocking.py Rule 8), at
    once and served to a waiting client: each pop is in the journal, so after kill -9 of an
    `fsync` keyspace the list is exactly what the acknowledged pops left, in order, and a
    popped element is never back."""
    data = tmp_path / "data"
    srv = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r = redis.Redis(port=srv.resp_port, socket_timeout=10)
    r.rpush("q", *[f"e{i}" for i in range(6)])
    assert r.blpop(["q"], 0) == (b"q", b"e0")  # at once
    assert r.brpop(["q"], 0) == (b"q", b"e5")
    assert r.execute_command("BLMPOP", 0, 1, "q", "LEFT") == [b"q", [b"e1"]]
    waiter = redis.Redis(port=srv.resp_port, socket_timeout=10)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(waiter.brpop(["w"], 0)))
    t.start()
    deadline = time.monotonic() + 10
    while int(r.info("clients")["blocked_clients"]) < 1:
        assert time.monotonic() < deadline, "the BRPOP never blocked"
        time.sleep(0.005)
    r.lpush("w", "x", "y")  # served: the waiter takes the tail, "x"
    t.join(10)
    assert got == [(b"w", b"x")]
    srv.kill()
    srv2 = server_factory("--keyspace-durability", "fsync", data_dir=data)
    r2 = redis.Redis(port=srv2.resp_port, socket_timeout=10)
    assert r2.lrange("q", 0, -1) == [b"e2", b"e3", b"e4"]
    assert r2.lrange("w", 0, -1) == [b"y"]
