"""Blocked group readers and claimers (issue 40): a write serves only as many of them as it can,
first come first served, the rest stay parked; nothing goes to a client that left.

Both RESP I/O paths (the conftest's `srv`), real sockets, an in-process server. The counts are
the notifier's (`statistics()`: `wakeups` = waiters made ready, `served` = attempts,
`served_empty` = attempts that found nothing, `parked` = consumers waiting in lines); the
tests wait on server state, never on time.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from topicsrv.clock import FakeClock

from .conftest import InProc, frame, info_field, read_until, wait_for

N = 50


def stats(s: InProc) -> dict[str, int]:
    return s.ctx.notifier.statistics()


def conn(s: InProc) -> redis.Redis:
    return redis.Redis(port=s.port, decode_responses=True, socket_timeout=10)


def block(s: InProc, name: str, n: int, request: Any) -> list[socket.socket]:
    """`n` clients blocked on `name`, one after another (each waits before the next comes)."""
    socks = []
    for i in range(n):
        c = s.connect()
        c.sendall(request(i))
        wait_for(lambda i=i: s.ctx.notifier.armed(name) == i + 1)
        socks.append(c)
    return socks


def xreadgroup(i: int) -> bytes:
    return frame(b"XREADGROUP", b"GROUP", b"g", b"c%d" % i, b"COUNT", b"1", b"BLOCK", b"0",
                 b"STREAMS", b"s", b">")


def claim(i: int) -> bytes:
    return frame(b"TOPIC.CLAIM", b"q", b"n%d" % i, b"BLOCK", b"0")


def served_since(s: InProc, before: dict[str, int], k: int) -> dict[str, int]:
    """Wait until `k` more attempts were made; the counters' growth."""
    wait_for(lambda: stats(s)["served"] - before["served"] >= k)
    now = stats(s)
    return {key: now[key] - before[key] for key in ("wakeups", "served", "served_empty")}


def close_all(socks: list[socket.socket]) -> None:
    for c in socks:
        c.close()


@contextmanager
def waiting(srv: tuple[InProc, FakeClock], name: str, n: int,
            request: Callable[[int], bytes]) -> Iterator[tuple[InProc, redis.Redis, list[socket.socket]]]:
    """`name` made (a stream with group `g`, or a queue for TOPIC.CLAIM), then `n` clients
    blocked on it in order; (server, a client, their sockets), all closed at the end."""
    s, _ = srv
    r = conn(s)
    if request is claim:
        r.execute_command("TOPIC.CREATE", name, "TYPE", "queue")
    elif request is not xread:
        r.xgroup_create(name, "g", id="$", mkstream=True)
    socks = block(s, name, n, request)
    try:
        yield s, r, socks
    finally:
        close_all(socks)
        r.close()


def xread(i: int) -> bytes:
    return frame(b"XREAD", b"BLOCK", b"0", b"STREAMS", b"f", b"$")


def one_write_serves_the_first(s: InProc, r: redis.Redis, socks: list[socket.socket],
                               key: str, value: str) -> dict[str, int]:
    """One XADD of `value` to `key`: one waiter made ready and served, the first; the
    counters before it."""
    before = stats(s)
    r.xadd(key, {"v": value})
    assert served_since(s, before, 1) == {"wakeups": 1, "served": 1, "served_empty": 0}
    assert value.encode() in read_until(socks[0], value.encode())
    assert s.ctx.notifier.armed(key) == len(socks) - 1
    return before


def burst(r: redis.Redis, key: str, values: list[str]) -> None:
    """One XADD per value, all in one step (MULTI/EXEC)."""
    pipe = r.pipeline(transaction=True)
    for v in values:
        pipe.xadd(key, {"v": v})
    pipe.execute()


def test_one_xadd_with_fifty_blocked_group_readers_wakes_exactly_the_first(
        srv: tuple[InProc, FakeClock]) -> None:
    with waiting(srv, "s", N, xreadgroup) as (s, r, socks):
        one_write_serves_the_first(s, r, socks, "s", "x0")
        assert info_field(s, "blocked_clients") == N - 1
        assert r.xpending("s", "g")["consumers"] == [{"name": "c0", "pending": 1}]


def test_group_readers_are_served_in_arrival_order_and_a_burst_of_k_wakes_k(
        srv: tuple[InProc, FakeClock]) -> None:
    with waiting(srv, "s", 30, xreadgroup) as (s, r, socks):
        before = stats(s)
        burst(r, "s", [f"x{i}" for i in range(5)])  # five entries in one step
        assert served_since(s, before, 5) == {"wakeups": 5, "served": 5, "served_empty": 0}
        for i in range(3):  # then one at a time
            r.xadd("s", {"v": f"x{5 + i}"})
        served_since(s, before, 8)
        for i in range(8):  # the first to block got the first entry
            assert b"x%d" % i in read_until(socks[i], b"x%d\r\n" % i)
        assert stats(s)["wakeups"] - before["wakeups"] == 8
        assert s.ctx.notifier.armed("s") == 22
        pending = {c["name"]: c["pending"] for c in r.xpending("s", "g")["consumers"]}
        assert pending == {f"c{i}": 1 for i in range(8)}


def test_topic_claim_block_serves_one_claimer_per_job_first_come_first_served(
        srv: tuple[InProc, FakeClock]) -> None:
    with waiting(srv, "q", N, claim) as (s, r, socks):
        before = one_write_serves_the_first(s, r, socks, "q", "j0")
        burst(r, "q", ["j1", "j2", "j3"])  # three jobs in one step
        assert served_since(s, before, 4) == {"wakeups": 4, "served": 4, "served_empty": 0}
        for i in (1, 2, 3):
            assert b"j%d" % i in read_until(socks[i], b"j%d\r\n" % i)
        assert s.ctx.notifier.armed("q") == N - 4


def test_no_job_goes_to_a_claimer_that_disconnected(srv: tuple[InProc, FakeClock]) -> None:
    """The first claimer leaves; the job goes to the second, leased once (delivery 1), and
    the queue holds exactly that one lease."""
    with waiting(srv, "q", 3, claim) as (s, r, socks):
        socks[0].close()  # no wait for the server to notice: the job comes at once
        r.xadd("q", {"job": "j0"})
        got = read_until(socks[1], b"j0")
        lease = got.split(b"j0\r\n", 1)[1].split(b"\r\n")  # seq, $len, lease id, deadline, delivery
        assert lease[0] == b":1" and lease[2].endswith(b".1") and lease[4] == b":1"  # the queue's
        # first lease (ids count up per queue), delivered once
        wait_for(lambda: s.ctx.notifier.armed("q") == 1)
        queue = r.execute_command("TOPIC.INFO", "q")["queue"]
        assert (queue["in_flight"], queue["ready"]) == (1, 0)


def test_no_entry_goes_to_a_group_reader_that_disconnected(srv: tuple[InProc, FakeClock]) -> None:
    with waiting(srv, "s", 3, xreadgroup) as (s, r, socks):
        socks[0].close()
        r.xadd("s", {"v": "x0"})
        assert b"x0" in read_until(socks[1], b"x0")
        assert r.xpending("s", "g")["consumers"] == [{"name": "c1", "pending": 1}]


def test_a_reader_that_times_out_passes_its_turn_on(srv: tuple[InProc, FakeClock]) -> None:
    # BLOCK 1500: long enough that the second reader is in line before it runs out on a
    # loaded machine (a 20 ms one could run out first, and the second never saw a line)
    early = frame(b"XREADGROUP", b"GROUP", b"g", b"early", b"BLOCK", b"1500", b"STREAMS", b"s",
                  b">")
    with waiting(srv, "s", 2, lambda i: early if i == 0 else xreadgroup(i)) as (s, r, socks):
        assert read_until(socks[0], b"*-1\r\n") == b"*-1\r\n"  # BLOCK 1500 ran out
        wait_for(lambda: s.ctx.notifier.armed("s") == 1)
        r.xadd("s", {"v": "x0"})
        assert b"x0" in read_until(socks[1], b"x0")
        assert r.xpending("s", "g")["consumers"] == [{"name": "c1", "pending": 1}]


def test_plain_xread_block_readers_all_get_the_entry(srv: tuple[InProc, FakeClock]) -> None:
    """Fan-out: every XREAD BLOCK reader is served by the one write, with no task each."""
    s, _ = srv
    conn(s).xadd("f", {"v": "old"})
    with waiting(srv, "f", 40, xread) as (s, r, socks):
        before = stats(s)
        r.xadd("f", {"v": "new"})
        assert served_since(s, before, 40) == {"wakeups": 40, "served": 40, "served_empty": 0}
        for c in socks:
            assert b"new" in read_until(c, b"new")
        assert s.ctx.notifier.armed("f") == 0


def test_client_unblock_ends_a_wait_and_its_turn_passes_on(srv: tuple[InProc, FakeClock]) -> None:
    with waiting(srv, "q", 3, claim) as (s, r, socks):
        ids = [int(c["id"]) for c in r.client_list() if c["cmd"] == "topic.claim"]
        assert len(ids) == 3
        assert r.execute_command("CLIENT", "UNBLOCK", ids[0]) == 1  # TIMEOUT: the null reply
        assert read_until(socks[0], b"*-1\r\n") == b"*-1\r\n"
        assert r.execute_command("CLIENT", "UNBLOCK", ids[1], "ERROR") == 1
        assert read_until(socks[1], b"\r\n") == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        assert r.execute_command("CLIENT", "UNBLOCK", ids[0]) == 0  # not blocked any more
        assert r.execute_command("CLIENT", "UNBLOCK", r.client_id()) == 0
        wait_for(lambda: s.ctx.notifier.armed("q") == 1)
        r.xadd("q", {"job": "j0"})
        assert b"j0" in read_until(socks[2], b"j0")
