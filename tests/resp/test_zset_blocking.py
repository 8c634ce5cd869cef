"""The blocking sorted-set pops (issue 36) on a real RESP front in process, on the lists' one
blocking machinery: clients served in the order they blocked, several keys in argument order,
a ZADD inside MULTI/EXEC wakes them only after EXEC, fractional timeouts, CLIENT UNBLOCK, and
BZMPOP's count; ZRANK's WITHSCORE (Redis 7.2's) on topicsrv alone. Waits for "blocked" are
polls of INFO, never sleeps of a guessed length."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.resp.conftest import RESP_IO, InProc, start_inproc
from tests.resp.test_list_blocking import blocked, start, wait_blocked


@pytest.fixture(params=RESP_IO, scope="module")
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(resp_io=request.param)
    yield s
    stop()


def client(srv: InProc) -> redis.Redis:
    return redis.Redis(port=srv.port, socket_timeout=20)


def test_clients_are_served_in_the_order_they_blocked(srv: InProc) -> None:
    r = client(srv)
    r.delete("zfifo")
    runs = []
    for i in range(3):
        runs.append(start(lambda: client(srv).bzpopmin(["zfifo"], 0)))
        wait_blocked(r, i + 1)
    assert r.zadd("zfifo", {"a": 1, "b": 2, "c": 3}) == 3
    for t, _ in runs:
        t.join(10)
    assert [out[0] for _, out in runs] == [(b"zfifo", b"a", 1.0), (b"zfifo", b"b", 2.0),
                                           (b"zfifo", b"c", 3.0)]
    assert r.exists("zfifo") == 0 and blocked(r) == 0


def test_several_keys_in_argument_order_and_bzpopmax(srv: InProc) -> None:
    r = client(srv)
    r.delete("zk1", "zk2")
    t1, out1 = start(lambda: client(srv).bzpopmax(["zk1", "zk2"], 0))
    wait_blocked(r, 1)
    r.zadd("zk2", {"x": 5, "y": 7})
    t1.join(10)
    assert out1 == [(b"zk2", b"y", 7.0)] and r.zrange("zk2", 0, -1) == [b"x"]


def test_a_zadd_inside_exec_wakes_only_after_it(srv: InProc) -> None:
    r = client(srv)
    r.delete("ztx")
    t, out = start(lambda: client(srv).bzpopmin(["ztx"], 0))
    wait_blocked(r, 1)
    pipe = r.pipeline(transaction=True)
    pipe.zadd("ztx", {"a": 3}).zadd("ztx", {"b": 1}).zadd("ztx", {"c": 2})
    assert pipe.execute() == [1, 1, 1]
    t.join(10)
    assert out == [(b"ztx", b"b", 1.0)]  # the set as EXEC left it
    assert r.zrange("ztx", 0, -1) == [b"c", b"a"]


def test_timeouts_client_unblock_and_bzmpop(srv: InProc) -> None:
    r = client(srv)
    r.delete("znone", "zm")
    assert client(srv).bzpopmin(["znone"], 0.05) is None
    assert client(srv).execute_command("BZMPOP", "0.05", "1", "znone", "MIN") is None
    c = client(srv)
    cid = c.client_id()
    t, out = start(lambda: c.bzpopmax(["znone"], 0))
    wait_blocked(r, 1)
    assert r.client_unblock(cid) is True
    t.join(10)
    assert out == [None] and blocked(r) == 0
    t, out = start(lambda: client(srv).execute_command("BZMPOP", "0", "2", "znone", "zm",
                                                       "MAX", "COUNT", "2"))
    wait_blocked(r, 1)
    r.zadd("zm", {"a": 1, "b": 2, "c": 3})
    t.join(10)
    assert out == [[b"zm", [[b"c", b"3"], [b"b", b"2"]]]]
    assert r.zrange("zm", 0, -1) == [b"a"]


def test_a_key_of_another_kind_keeps_the_client_waiting(srv: InProc) -> None:
    r = client(srv)
    r.delete("zturns")
    t, out = start(lambda: client(srv).bzpopmin(["zturns"], 0))
    wait_blocked(r, 1)
    r.rpush("zturns", "x")
    r.delete("zturns")
    assert blocked(r) == 1 and out == []
    r.zadd("zturns", {"m": 1})
    t.join(10)
    assert out == [(b"zturns", b"m", 1.0)]


def test_zrank_withscore_is_redis_7_2s(srv: InProc) -> None:
    r = client(srv)
    r.delete("zr")
    r.zadd("zr", {"a": 1.5, "b": 2})
    assert r.execute_command("ZRANK", "zr", "b", "WITHSCORE") == [1, 2.0]
    assert r.execute_command("ZREVRANK", "zr", "b", "withscore") == [0, 2.0]
    assert r.execute_command("ZRANK", "zr", "nope", "WITHSCORE") is None
    assert r.execute_command("ZRANK", "nokey", "a", "WITHSCORE") is None
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("ZRANK", "zr", "b", "WITHSCORES")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command("ZRANK", "zr", "b", "WITHSCORE", "x")
